"""The admin's Django Task results (``taskclaim.task_result``): browse runs by
status, task and queue, search by id or key, read each attempt's error and
traceback, retry failed runs and cancel ready ones.

Retrying needs the ``add_storedtaskresult`` permission (it enqueues a new
run), cancelling ``change_storedtaskresult``.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, TypeVar

from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from astral_taskclaim.admin.queries import ModelAdminOf, id_or_key, preformatted
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.envelope import encode_json
from astral_taskclaim.db.statements import Connector
from astral_taskclaim.models import Claim
from astral_taskclaim.tasks_backend.models import RunCancelled, StoredTaskResult

_M = TypeVar("_M", bound=Model)

_CANCELLED = f"{RunCancelled.__module__}.{RunCancelled.__qualname__}"


class RunHistoryAdmin(ModelAdminOf[_M]):
    """The base of the run histories' admins: read-only rows found by id or
    exact key, whose retry action (the model's add permission) enqueues a
    new run, and each failed attempt's error shown."""

    change_form_template = "admin/astral_taskclaim/run_change_form.html"
    #: Whether the errors hold a message of their own besides the traceback.
    error_messages: ClassVar[bool] = False

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[_M], search_term: str
    ) -> tuple[QuerySet[_M], bool]:
        found = id_or_key(queryset, search_term)
        return (queryset, False) if found is None else (found, False)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_retry_permission(self, request: HttpRequest) -> bool:
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.add_{opts.model_name}")

    @admin.display(description=_("errors"))
    def error_history(self, obj: Any) -> SafeString | str:
        """Each failed attempt: number, time, exception, message, traceback."""
        errors = obj.error_entries
        if not errors:
            return "-"
        rows = [
            (
                _("attempt"),
                error.get("attempt", "?"),
                error.get("at", ""),
                error.get("exception_class_path") or "",
                preformatted(str(error.get("message", "")), "taskclaim-message")
                if self.error_messages
                else "",
                preformatted(str(error.get("traceback", "")), "taskclaim-traceback"),
            )
            for error in errors
        ]
        return format_html_join("", "<p><strong>{} {}</strong> {} {}</p>{}{}", rows)


class TaskResultAdmin(RunHistoryAdmin[StoredTaskResult]):
    """Read-only run history with retry and cancel actions."""

    list_display = ("id", "task_path", "status", "attempts", "queue", "enqueued_at", "finished_at")
    list_filter = ("status", "task_path", "queue")
    search_fields = ("=key",)
    date_hierarchy = None
    list_per_page = 100
    show_full_result_count = False
    fields = (
        "id",
        "task_path",
        "status",
        "backend",
        "queue_name",
        "queue",
        "priority",
        "key",
        "run_after",
        "arguments",
        "result",
        "attempts",
        "worker_ids",
        "enqueued_at",
        "started_at",
        "last_attempted_at",
        "finished_at",
        "error_history",
    )
    readonly_fields = fields
    actions = ("retry_runs", "cancel_runs")
    detail_action = ("retry_runs", _("Retry"))

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        """Cancelling marks runs failed: the model's change permission."""
        return super().has_change_permission(request)

    @admin.display(description=_("arguments"))
    def arguments(self, obj: StoredTaskResult) -> SafeString:
        text = json.dumps({"args": obj.args, "kwargs": obj.kwargs}, indent=2, ensure_ascii=False)
        return format_html('<pre class="taskclaim-json">{}</pre>', text)

    @admin.display(description=_("return value"))
    def result(self, obj: StoredTaskResult) -> SafeString | str:
        if obj.status != "SUCCESSFUL":
            return "-"
        text = json.dumps(obj.return_value, indent=2, ensure_ascii=False)
        return format_html('<pre class="taskclaim-json">{}</pre>', text)

    @admin.action(description=_("Retry selected failed runs"), permissions=("retry",))
    def retry_runs(self, request: HttpRequest, queryset: QuerySet[StoredTaskResult]) -> None:
        """Enqueues each failed run's task again with its arguments."""
        # Imported here: Django's Tasks framework is optional (Django 6, or
        # django-tasks on 5.2), and the admin must load without it.
        from astral_taskclaim.tasks_backend.results import load_task

        retried = 0
        claims = Claim.objects.using(app_settings.DATABASE).active()
        for row in queryset.filter(status="FAILED"):
            # A coalescing run's key still claimed would return its holder, not a new run.
            holder = None if row.key is None else claims.filter(key=row.key).first()
            if holder is not None:
                text = _("Run %(run)s: not enqueued: its key is claimed by run %(holder)s") % {
                    "run": row.pk,
                    "holder": holder.token,
                }
                self.message_user(request, text, messages.WARNING)
                continue
            # The key the run coalesced under, which a key given at enqueue
            # (``using(key=...)``) made other than the task's own.
            coalescing = {} if row.key is None else {"key": row.key}
            try:
                task = load_task(row.task_path)
                if coalescing and getattr(task, "window_seconds", None) is None:
                    text = _(
                        "Run %(run)s: not enqueued: its window was given when it was "
                        "enqueued and is not kept; enqueue it again from code"
                    ) % {"run": row.pk}
                    self.message_user(request, text, messages.WARNING)
                    continue
                task.using(
                    priority=row.priority,
                    queue_name=row.queue_name,
                    backend=row.backend,
                    **coalescing,
                ).enqueue(*row.args, **row.kwargs)
            except Exception as error:
                self.message_user(
                    request, f"Run {row.pk}: {type(error).__name__}: {error}", messages.ERROR
                )
                continue
            retried += 1
        self.message_user(
            request,
            ngettext("%(count)d run enqueued again.", "%(count)d runs enqueued again.", retried)
            % {"count": retried},
            messages.SUCCESS if retried else messages.INFO,
        )

    @admin.action(description=_("Cancel selected ready runs"), permissions=("cancel",))
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[StoredTaskResult]) -> None:
        """Marks ready runs failed, so workers ack their messages unrun, and
        releases the key claims of the coalescing ones."""
        error = {
            "exception_class_path": _CANCELLED,
            "traceback": f"{RunCancelled.__name__}: cancelled by {request.user} in the admin\n",
            "final": True,
        }
        ids = [str(pk) for pk in queryset.filter(status="READY").values_list("pk", flat=True)]
        params = {"ids": ids, "error": encode_json([error], name="errors")}
        [(cancelled, _released)] = Connector(app_settings.DATABASE).fetch(
            "admin/cancel_runs.sql", params
        )
        self.message_user(
            request,
            ngettext("%(count)d run cancelled.", "%(count)d runs cancelled.", cancelled)
            % {"count": cancelled},
            messages.SUCCESS,
        )
