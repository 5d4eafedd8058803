"""The app's models: Django's view of the tables its SQL migrations create.

:class:`Claim` (``taskclaim.claim``) is defined here; the PostgreSQL queue's
:class:`QueueMessage` (``taskclaim.message``) lives with that queue and the
tasks backend's :class:`StoredTaskResult` (``taskclaim.task_result``) with
the backend, the schedules' :class:`ScheduleRecord` (``taskclaim.schedule``)
with them. Importing them here is what registers them with Django under
the ``astral_taskclaim`` label.
"""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from astral_taskclaim.db.sql_owned import SqlOwnedModel
from astral_taskclaim.fields import LoadableDateTimeField
from astral_taskclaim.queues.postgres.models import QueueMessage, QueueMessageQuerySet
from astral_taskclaim.schedules.models import ScheduleRecord
from astral_taskclaim.tasks_backend.models import StoredTaskResult

__all__ = [
    "Claim",
    "ClaimQuerySet",
    "QueueMessage",
    "QueueMessageQuerySet",
    "ScheduleRecord",
    "StoredTaskResult",
]


class ClaimQuerySet(models.QuerySet["Claim"]):
    """Claims by state, judged by the database clock like the SQL itself."""

    def active(self) -> ClaimQuerySet:
        """Claims whose window has not ended: their key cannot be claimed."""
        return self.filter(expires_at__gte=Now())

    def expired(self) -> ClaimQuerySet:
        """Claims past their window, which ``delete_expired()`` removes."""
        return self.filter(expires_at__lt=Now())


class Claim(SqlOwnedModel):
    """One task key's claim. Unmanaged: the app's SQL owns the table, and
    claims are written by :func:`astral_taskclaim.claim_task` and friends."""

    key = models.TextField(_("key"), primary_key=True)
    expires_at = LoadableDateTimeField(_("expires at"))
    token = models.UUIDField(_("token"))

    objects = ClaimQuerySet.as_manager()

    class Meta(SqlOwnedModel.Meta):
        db_table = '"taskclaim"."claim"'
        verbose_name = _("claim")
        verbose_name_plural = _("claims")
        ordering = ("expires_at",)

    def __str__(self) -> str:
        return self.key

    @property
    def is_active(self) -> bool:
        """Whether the claim still holds its key (by this process's clock)."""
        return bool(self.expires_at >= timezone.now())
