"""Django's view of ``taskclaim.task_result`` (created by the app's SQL
migration): one row per enqueued run of a Django Task."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils.translation import gettext_lazy as _

from astral_taskclaim.db.sql_owned import SqlOwnedModel, error_objects
from astral_taskclaim.fields import LoadableDateTimeField

#: Django's ``TaskResultStatus`` values, without importing the framework
#: (this model loads on a Django 5.2 project without ``django-tasks``).
_STATUS_CHOICES = [
    ("READY", _("Ready")),
    ("RUNNING", _("Running")),
    ("FAILED", _("Failed")),
    ("SUCCESSFUL", _("Successful")),
]


class StoredTaskResult(SqlOwnedModel):
    """A run of a Django Task enqueued through ``ClaimTaskBackend``.
    Unmanaged: the app's SQL owns the table; the backend and its workers
    write it, ``get_result()`` reads it."""

    id = models.UUIDField(_("id"), primary_key=True)
    task_path = models.TextField(_("task"))
    backend = models.TextField(_("backend"))
    # Two "queues": Django's name for the Task's queue, and the queue it
    # travels on; the labels say which is which.
    queue_name = models.TextField(
        _("Task queue_name"),
        help_text=_("The Task's queue_name (one of the backend's QUEUES)."),
    )
    queue = models.TextField(
        _("TASKCLAIM_QUEUES alias"),
        help_text=_(
            "The TASKCLAIM_QUEUES alias the run travels on: manage.py consume_claimed runs it."
        ),
    )
    priority = models.SmallIntegerField(_("priority"), default=0)
    run_after = LoadableDateTimeField(_("run after"), null=True, blank=True)
    # NULL, not "": a run that does not coalesce has no key at all.
    key = models.TextField(_("key"), null=True, blank=True)  # noqa: DJ001
    status = models.TextField(_("status"), choices=_STATUS_CHOICES, default="READY")
    args = models.JSONField(_("args"), default=list)
    kwargs = models.JSONField(_("kwargs"), default=dict)
    return_value = models.JSONField(_("return value"), null=True, blank=True)
    errors = models.JSONField(_("errors"), default=list)
    worker_ids = models.JSONField(_("worker ids"), default=list)
    # Loadable: a row holding 'infinity' must not break the admin's pages.
    enqueued_at = LoadableDateTimeField(_("enqueued at"))
    started_at = LoadableDateTimeField(_("started at"), null=True, blank=True)
    last_attempted_at = LoadableDateTimeField(_("last attempted at"), null=True, blank=True)
    finished_at = LoadableDateTimeField(_("finished at"), null=True, blank=True)

    class Meta(SqlOwnedModel.Meta):
        db_table = '"taskclaim"."task_result"'
        verbose_name = _("task result")
        verbose_name_plural = _("task results")
        ordering = ("-enqueued_at",)

    def __str__(self) -> str:
        return f"{self.task_path} {self.pk}"

    @property
    def attempts(self) -> int:
        """Attempts so far: one worker id each (0 for a row whose
        ``worker_ids`` is no list)."""
        return len(self.worker_ids) if isinstance(self.worker_ids, list) else 0

    @property
    def error_entries(self) -> list[dict[str, Any]]:
        """The stored errors that are objects, in order."""
        return error_objects(self.errors)

    @property
    def last_error(self) -> dict[str, Any] | None:
        """The latest failed attempt's error, if any."""
        errors = self.error_entries
        return errors[-1] if errors else None


class RunCancelled(Exception):
    """The error recorded on a run cancelled from the admin before it ran."""
