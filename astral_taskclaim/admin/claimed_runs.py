"""The admin's claimed-task runs (``taskclaim.run``): browse runs by status,
task and queue, search by run id or key, read each failed attempt's
exception, message and traceback, and enqueue failed runs again.

Retrying needs the ``add_claimedrun`` permission (it enqueues a new run
under a fresh claim). The table may hold millions of rows, so counts are
estimates and the task and queue filters list the registered tasks and
configured queues rather than scanning the table for them.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from astral_taskclaim.admin.queries import LargeTableAdmin, preformatted
from astral_taskclaim.admin.results import RunHistoryAdmin
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.models import Claim, ClaimedRun
from astral_taskclaim.tasks import ClaimedTask, registry

#: Why a selected run of each status but ``FAILED`` is not enqueued again.
_NOT_FAILED = {
    "SUCCESSFUL": _("it succeeded; nothing to enqueue again"),
    "RETRYING": _("it is still being retried; its own message runs it again"),
}

#: The most selected runs that did not fail named one by one; the rest are
#: summed up in one message (a selection across the table may hold millions).
_NAMED_SKIPS = 10


def _run_message(run: object, problem: str) -> str:
    """What the retry action says of ``run``. The admin capitalizes each
    message's first letter, so the text starts with a word, not the id,
    which it shows exactly."""
    return _("Run %(run)s: %(problem)s") % {"run": run, "problem": problem}


def _key_to_enqueue(task: ClaimedTask[Any], claimed: str) -> str:
    """The key ``task.enqueue`` takes to claim ``claimed``, a run's stored
    key: without the task's ``key_namespace``, which ``enqueue`` adds."""
    if task.key_namespace is None:
        return claimed
    return claimed.removeprefix(f"{task.key_namespace}:")


class _TaskFilter(admin.SimpleListFilter):
    """Runs of one registered claimed task."""

    title = _("task")
    parameter_name = "task"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return sorted((task.name, task.name) for task in registry)

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset if value is None else queryset.filter(task=value)


class _QueueFilter(_TaskFilter):
    """Runs from one configured queue."""

    title = _("queue")
    parameter_name = "queue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(alias, alias) for alias in sorted(app_settings.QUEUES)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset if value is None else queryset.filter(queue=value)


class ClaimedRunAdmin(RunHistoryAdmin[ClaimedRun], LargeTableAdmin[ClaimedRun]):
    """Read-only claimed-task run history with a retry action."""

    list_display = (
        "id",
        "task",
        "key",
        "status",
        "attempts",
        "queue",
        "last_attempted_at",
        "finished_at",
    )
    list_filter = ("status", _TaskFilter, _QueueFilter)
    search_fields = ("=key",)
    search_help_text = _("A run id, or a key exactly.")
    fields = (
        "id",
        "task",
        "status",
        "queue",
        "key",
        "attempts",
        "worker_list",
        "started_at",
        "last_attempted_at",
        "finished_at",
        "task_payload",
        "error_history",
    )
    readonly_fields = fields
    actions = ("retry_runs",)
    detail_action = ("retry_runs", _("Enqueue again"))
    error_messages = True

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description=_("worker ids"))
    def worker_list(self, obj: ClaimedRun) -> str:
        workers = obj.worker_ids if isinstance(obj.worker_ids, list) else []
        return ", ".join(map(str, workers)) or "-"

    @admin.display(description=_("task payload"))
    def task_payload(self, obj: ClaimedRun) -> SafeString | str:
        return "-" if obj.payload is None else preformatted(obj.payload, "taskclaim-json")

    @admin.action(description=_("Enqueue selected failed runs again"), permissions=("retry",))
    def retry_runs(self, request: HttpRequest, queryset: QuerySet[ClaimedRun]) -> None:
        """Enqueues each failed run's task again, with its key and payload,
        under a fresh claim; says which could not be and why, and why each
        selected run that did not fail is not."""
        self._explain_not_failed(request, queryset)
        tasks = {task.name: task for task in registry}
        enqueued = 0
        claims = Claim.objects.using(app_settings.DATABASE).active()
        for row in queryset.filter(status="FAILED"):
            problem: str | None = None
            task = tasks.get(row.task)
            key = row.key if task is None else _key_to_enqueue(task, row.key)
            holder = None if task is None else claims.filter(key=task.claim_key(key)).first()
            if task is None:
                problem = _("no claimed task %(task)s is registered") % {"task": row.task}
            elif row.payload is None:
                problem = str(_("its task payload was not kept"))
            elif holder is not None:
                problem = _("its key is claimed (run %(run)s)") % {"run": holder.token}
            else:
                try:
                    token = task.enqueue(key, json.loads(row.payload))
                except Exception as error:
                    problem = f"{type(error).__name__}: {error}"
                else:
                    if token is None:
                        problem = str(_("its key was claimed meanwhile"))
            if problem is not None:
                self.message_user(request, _run_message(row.pk, problem), messages.WARNING)
                continue
            enqueued += 1
        text = ngettext(
            "%(count)d run enqueued again under a new claim.",
            "%(count)d runs enqueued again under a new claim.",
            enqueued,
        )
        level = messages.SUCCESS if enqueued else messages.INFO
        self.message_user(request, text % {"count": enqueued}, level)

    def _explain_not_failed(self, request: HttpRequest, queryset: QuerySet[ClaimedRun]) -> None:
        """One message for each selected run that did not fail (the first
        :data:`_NAMED_SKIPS`, then one for the rest): why it is not enqueued."""
        rows = queryset.exclude(status="FAILED").values_list("pk", "status")
        skipped = list(rows[: _NAMED_SKIPS + 1])
        for run, status in skipped[:_NAMED_SKIPS]:
            reason = _NOT_FAILED.get(status) or _("its status is %(status)s") % {"status": status}
            self.message_user(request, _run_message(run, str(reason)), messages.INFO)
        if len(skipped) > _NAMED_SKIPS:
            text = _("The other selected runs that did not fail are not enqueued again either.")
            self.message_user(request, text, messages.INFO)
