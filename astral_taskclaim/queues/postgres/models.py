"""Django's view of ``taskclaim.message``, the PostgreSQL queue's table.

Unmanaged: migration ``0005_queue`` creates the table from this package's
SQL, and :class:`~astral_taskclaim.queues.postgres.PostgresQueue` writes it.
The admin reads it through :class:`QueueMessage`; the app's models module
re-exports it so Django registers it under the ``astral_taskclaim`` label.
"""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from astral_taskclaim.db.sql_owned import SqlOwnedMessage, SqlOwnedModel
from astral_taskclaim.fields import LoadableDateTimeField


class QueueMessageQuerySet(models.QuerySet["QueueMessage"]):
    """Messages by state, judged by the database clock like the queue itself."""

    def for_queue(self, name: str) -> QueueMessageQuerySet:
        """Messages of the PostgreSQL queue named ``name`` (its ``queue_name``)."""
        return self.filter(queue=name)

    def ready(self) -> QueueMessageQuerySet:
        """Messages a consumer may receive now (an expired lease included)."""
        return self.filter(visible_at__lte=Now())

    def leased(self) -> QueueMessageQuerySet:
        """Messages a consumer holds under an unexpired lease."""
        return self.filter(lease__isnull=False, visible_at__gt=Now())

    def delayed(self) -> QueueMessageQuerySet:
        """Messages waiting out a send or retry delay."""
        return self.filter(lease__isnull=True, visible_at__gt=Now())


class QueueMessage(SqlOwnedMessage):
    """One message of a PostgreSQL queue (``taskclaim.message``). Unmanaged:
    the app's SQL owns the table, and
    :class:`astral_taskclaim.queues.postgres.PostgresQueue` writes it."""

    attempts = models.IntegerField(_("attempts"), default=0)
    enqueued_at = LoadableDateTimeField(_("enqueued at"))
    visible_at = LoadableDateTimeField(_("visible at"))
    lease = models.UUIDField(_("lease"), null=True, blank=True)
    leased_at = LoadableDateTimeField(_("leased at"), null=True, blank=True)
    priority = models.SmallIntegerField(_("priority"), default=0)
    # NULL, not "": the SQL owns the column, and most messages never fail.
    last_error = models.TextField(  # noqa: DJ001
        _("last error"), null=True, blank=True, help_text=_("The error its latest retry followed.")
    )

    objects = QueueMessageQuerySet.as_manager()

    class Meta(SqlOwnedModel.Meta):
        db_table = '"taskclaim"."message"'
        verbose_name = _("queue message")
        verbose_name_plural = _("queue messages")
        ordering = ("visible_at", "id")

    @property
    def key(self) -> str | None:
        """The claim key of a claimed-task envelope, else ``None``."""
        payload = self.payload
        if isinstance(payload, dict) and isinstance(payload.get("key"), str):
            return str(payload["key"])
        return None
