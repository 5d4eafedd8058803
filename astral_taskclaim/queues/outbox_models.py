"""Django's view of ``taskclaim.outbox``, the remote queues' outbox.

Unmanaged: migrations ``0007_outbox`` and ``0009_outbox_dead_letter`` create
the table from this package's SQL; enqueues and the relay
(:mod:`astral_taskclaim.worker.relay`) write it. The admin reads it through
:class:`OutboxRow`; the app's models module re-exports it so Django
registers it under the ``astral_taskclaim`` label.
"""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from astral_taskclaim.db.sql_owned import SqlOwnedMessage, SqlOwnedModel
from astral_taskclaim.fields import LoadableDateTimeField

__all__ = ["OutboxRow", "OutboxRowQuerySet"]


class OutboxRowQuerySet(models.QuerySet["OutboxRow"]):
    """Outbox rows by state, judged by the database clock like the relay."""

    def dead(self) -> OutboxRowQuerySet:
        """Rows the service refused for good, set aside until retried."""
        return self.filter(dead_at__isnull=False)

    def due(self) -> OutboxRowQuerySet:
        """Rows the relay sends next."""
        return self.filter(dead_at__isnull=True, available_at__lte=Now())

    def waiting(self) -> OutboxRowQuerySet:
        """Rows waiting out a deferral or the backoff after a failed send."""
        return self.filter(dead_at__isnull=True, available_at__gt=Now())


class OutboxRow(SqlOwnedMessage):
    """One message of a remote queue waiting for the relay
    (``taskclaim.outbox``), its ``payload`` the body decoded from JSON.
    Unmanaged: the app's SQL owns the table."""

    enqueued_at = LoadableDateTimeField(_("enqueued at"))
    attempts = models.IntegerField(_("attempts"), default=0)
    # NULL, not "": the SQL owns the column, and most rows never fail.
    last_error = models.TextField(  # noqa: DJ001
        _("last error"), null=True, blank=True, help_text=_("Why its latest send failed.")
    )
    available_at = LoadableDateTimeField(_("available at"))
    dead_at = LoadableDateTimeField(_("set aside at"), null=True, blank=True)

    objects = OutboxRowQuerySet.as_manager()

    class Meta(SqlOwnedModel.Meta):
        db_table = '"taskclaim"."outbox"'
        verbose_name = _("outbox row")
        verbose_name_plural = _("outbox rows")
        ordering = ("id",)
