"""Django's view of ``taskclaim.claim``, ``taskclaim.message`` and
``taskclaim.task_result`` (created by the app's SQL migrations)."""

from __future__ import annotations

import json
from typing import Any

from django.db import models
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from .tasks_backend.models import StoredTaskResult

__all__ = ["Claim", "QueueMessage", "StoredTaskResult"]


class ClaimQuerySet(models.QuerySet["Claim"]):
    """Claims by state, judged by the database clock like the SQL itself."""

    def active(self) -> ClaimQuerySet:
        """Claims whose window has not ended: their key cannot be claimed."""
        return self.filter(expires_at__gte=Now())

    def expired(self) -> ClaimQuerySet:
        """Claims past their window, which ``delete_expired()`` removes."""
        return self.filter(expires_at__lt=Now())


class Claim(models.Model):
    """One task key's claim. Unmanaged: the app's SQL owns the table, and
    claims are written by :func:`astral_taskclaim.claim_task` and friends."""

    key = models.TextField(_("key"), primary_key=True)
    expires_at = models.DateTimeField(_("expires at"))
    token = models.UUIDField(_("token"))

    objects = ClaimQuerySet.as_manager()

    class Meta:
        managed = False
        db_table = '"taskclaim"."claim"'
        verbose_name = _("claim")
        verbose_name_plural = _("claims")
        ordering = ("expires_at",)

    def __str__(self) -> str:
        return self.key

    @property
    def is_active(self) -> bool:
        """Whether the claim still holds its key (by this process's clock)."""
        from django.utils import timezone

        return self.expires_at >= timezone.now()


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


class QueueMessage(models.Model):
    """One message of a PostgreSQL queue (``taskclaim.message``). Unmanaged:
    the app's SQL owns the table, and
    :class:`astral_taskclaim.queues.postgres.PostgresQueue` writes it."""

    id = models.BigAutoField(_("id"), primary_key=True)
    queue = models.TextField(_("queue"))
    body = models.TextField(_("body"), help_text=_("The message's JSON, byte for byte."))
    attempts = models.IntegerField(_("attempts"), default=0)
    enqueued_at = models.DateTimeField(_("enqueued at"))
    visible_at = models.DateTimeField(_("visible at"))
    lease = models.UUIDField(_("lease"), null=True, blank=True)
    leased_at = models.DateTimeField(_("leased at"), null=True, blank=True)
    priority = models.SmallIntegerField(_("priority"), default=0)
    # NULL, not "": the SQL owns the column, and most messages never fail.
    last_error = models.TextField(  # noqa: DJ001
        _("last error"), null=True, blank=True, help_text=_("The error its latest retry followed.")
    )

    objects = QueueMessageQuerySet.as_manager()

    class Meta:
        managed = False
        db_table = '"taskclaim"."message"'
        verbose_name = _("queue message")
        verbose_name_plural = _("queue messages")
        ordering = ("visible_at", "id")

    def __str__(self) -> str:
        return f"{self.queue} #{self.pk}"

    @property
    def payload(self) -> Any:
        """The body decoded from JSON."""
        return json.loads(self.body)

    @property
    def key(self) -> str | None:
        """The claim key of a claimed-task envelope, else ``None``."""
        payload = self.payload
        if isinstance(payload, dict) and isinstance(payload.get("key"), str):
            return str(payload["key"])
        return None
