"""The app's models: Django's view of the tables its SQL migrations create.

:class:`Claim` (``taskclaim.claim``), :class:`FollowUp`
(``taskclaim.follow_up``) and :class:`ClaimedRun` (``taskclaim.run``) are
defined here; the PostgreSQL queue's
:class:`QueueMessage` (``taskclaim.message``) lives with that queue, the
remote queues' :class:`OutboxRow` (``taskclaim.outbox``) with their outbox,
the tasks backend's :class:`StoredTaskResult` (``taskclaim.task_result``) with
the backend, and the schedules' :class:`ScheduleRecord` (``taskclaim.schedule``)
with them. Importing them here is what registers them with Django under
the ``astral_taskclaim`` label.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models.functions import Now
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from astral_taskclaim.db.sql_owned import SqlOwnedModel, error_objects
from astral_taskclaim.fields import LoadableDateTimeField
from astral_taskclaim.queues.outbox_models import OutboxRow, OutboxRowQuerySet
from astral_taskclaim.queues.postgres.models import QueueMessage, QueueMessageQuerySet
from astral_taskclaim.schedules.models import ScheduleRecord
from astral_taskclaim.tasks_backend.models import StoredTaskResult

__all__ = [
    "Claim",
    "ClaimQuerySet",
    "ClaimedRun",
    "FollowUp",
    "OutboxRow",
    "OutboxRowQuerySet",
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


class FollowUp(SqlOwnedModel):
    """A key's follow-up run (``trailing`` triggers): pending until its
    message's delivery claims the key and takes it (see
    :mod:`astral_taskclaim.claims.trailing`). Unmanaged: the app's SQL owns
    the table."""

    token = models.UUIDField(_("token"), primary_key=True)
    key = models.TextField(_("key"))
    # Text, not JSON: what the enqueue wrote, as its run reads it.
    task = models.TextField(_("task"))
    window_seconds = models.FloatField(_("window (seconds)"))
    created_at = LoadableDateTimeField(_("first trigger"))
    updated_at = LoadableDateTimeField(_("latest write"))
    taken_at = LoadableDateTimeField(_("run started"), null=True, blank=True)
    debounce_seconds = models.FloatField(_("debounce (seconds)"), null=True, blank=True)
    max_wait_seconds = models.FloatField(_("maximum wait (seconds)"), null=True, blank=True)

    class Meta(SqlOwnedModel.Meta):
        db_table = '"taskclaim"."follow_up"'
        verbose_name = _("follow-up run")
        verbose_name_plural = _("follow-up runs")
        ordering = ("created_at",)

    def __str__(self) -> str:
        return f"{self.key} {self.pk}"


#: The statuses of :class:`ClaimedRun`.
RUN_STATUS_CHOICES = [
    ("RETRYING", _("Retrying")),
    ("SUCCESSFUL", _("Successful")),
    ("FAILED", _("Failed")),
]


class ClaimedRun(SqlOwnedModel):
    """One run of a ``@claimed_task`` (all attempts under one claim token),
    written by the workers with each settlement of its message (see
    :mod:`astral_taskclaim.queues.runs`). Unmanaged: the app's SQL owns the
    table. Times load whatever a row holds (:class:`LoadableDateTimeField`)."""

    id = models.UUIDField(_("run id"), primary_key=True, help_text=_("The run's claim token."))
    task = models.TextField(_("task"))
    queue = models.TextField(_("queue"), help_text=_("The TASKCLAIM_QUEUES alias."))
    key = models.TextField(_("key"))
    status = models.TextField(_("status"), choices=RUN_STATUS_CHOICES)
    attempts = models.IntegerField(_("attempts"))
    errors = models.JSONField(_("errors"), default=list)
    worker_ids = models.JSONField(_("worker ids"), default=list)
    # Text, not JSON: what json.dumps wrote, loaded only for a retry.
    payload = models.TextField(_("task payload"), null=True, blank=True)  # noqa: DJ001
    started_at = LoadableDateTimeField(_("started at"))
    last_attempted_at = LoadableDateTimeField(_("last attempted at"))
    finished_at = LoadableDateTimeField(_("finished at"), null=True, blank=True)

    class Meta(SqlOwnedModel.Meta):
        db_table = '"taskclaim"."run"'
        verbose_name = _("claimed task run")
        verbose_name_plural = _("claimed task runs")
        # Newest first, runs still retrying (no finish) above: an index scan.
        ordering = ("-finished_at",)

    def __str__(self) -> str:
        return f"{self.task} {self.pk}"

    @property
    def error_entries(self) -> list[dict[str, Any]]:
        """The stored errors that are objects, in order."""
        return error_objects(self.errors)
