"""The admin for the remote queues' outbox rows (``taskclaim.outbox``).

Rows are read-only. Those the service refused for good are set aside by
the relay (:mod:`astral_taskclaim.worker.relay`) with the reason; "retry" (make
rows set aside or waiting out a backoff due now) needs
``change_outboxrow``, deleting needs ``delete_outboxrow``.
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.db.models.functions import Now
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from astral_taskclaim.admin.queries import LargeTableAdmin, delete_selected
from astral_taskclaim.admin.times import seconds_from_now, shown_time, with_safe_times
from astral_taskclaim.models import OutboxRow
from astral_taskclaim.queues import outbox

logger = logging.getLogger(__name__)

#: The row's timestamp columns, read through :func:`.with_safe_times`.
_TIMES = ("enqueued_at", "available_at", "dead_at")
#: The body is shown up to this many characters, then cut.
RAW_BODY_CHARS = 10_000


class _OutboxStateFilter(admin.SimpleListFilter):
    """Set aside (refused for good), due (sent next) or waiting (a deferral
    or a backoff), by the database clock."""

    title = _("state")
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("dead", _("set aside")), ("due", _("due")), ("waiting", _("waiting"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value == "dead":
            return queryset.filter(dead_at__isnull=False)
        if value == "due":
            return queryset.filter(dead_at__isnull=True, available_at__lte=Now())
        if value == "waiting":
            return queryset.filter(dead_at__isnull=True, available_at__gt=Now())
        return queryset


class OutboxRowAdmin(LargeTableAdmin[OutboxRow]):
    """Browse outbox rows by queue and state; retry or delete those set aside."""

    list_display = ("id", "queue", "state", "attempts", "last_error", "enqueued_at_shown")
    list_filter = ("queue", _OutboxStateFilter)
    sortable_by = ("id",)
    fields = (
        "id",
        "queue",
        "state",
        "attempts",
        "last_error",
        "enqueued_at_shown",
        "available_at_shown",
        "dead_at_shown",
        "raw_body",
    )
    readonly_fields = fields
    actions = ("retry_rows", "delete_rows")

    def get_queryset(self, request: HttpRequest) -> QuerySet[OutboxRow]:
        return with_safe_times(super().get_queryset(request), *_TIMES)

    def has_retry_permission(self, request: HttpRequest) -> bool:
        """Whether the user may make rows due again."""
        return super().has_change_permission(request)

    @admin.display(description=_("state"))
    def state(self, obj: OutboxRow) -> str:
        """Set aside, waiting (deferred or backing off) or due."""
        if seconds_from_now(obj, "dead_at") is not None:
            return str(_("set aside"))
        due_in = seconds_from_now(obj, "available_at")
        return str(_("waiting") if due_in is not None and due_in > 0 else _("due"))

    @admin.display(description=_("enqueued at"), ordering="enqueued_at")
    def enqueued_at_shown(self, obj: OutboxRow) -> Any:
        return shown_time(obj, "enqueued_at")

    @admin.display(description=_("available at"))
    def available_at_shown(self, obj: OutboxRow) -> Any:
        """When the relay may send it (a deferral, or the end of its backoff)."""
        return shown_time(obj, "available_at")

    @admin.display(description=_("set aside at"))
    def dead_at_shown(self, obj: OutboxRow) -> Any:
        return shown_time(obj, "dead_at")

    @admin.display(description=_("body"))
    def raw_body(self, obj: OutboxRow) -> SafeString:
        """The body as stored (escaped: shown, not run), cut after
        :data:`RAW_BODY_CHARS`."""
        body = obj.body
        cut = "…" if len(body) > RAW_BODY_CHARS else ""
        return format_html('<pre class="taskclaim-body">{}{}</pre>', body[:RAW_BODY_CHARS], cut)

    @admin.action(description=_("Retry selected rows now"), permissions=("retry",))
    def retry_rows(self, request: HttpRequest, queryset: QuerySet[OutboxRow]) -> None:
        """Makes the selected rows set aside or backing off due now."""
        database = queryset.db
        ids = list(queryset.order_by().values_list("pk", flat=True))
        with transaction.atomic(using=database):
            count = outbox.retry(database, ids)
        logger.info(
            "admin made %d outbox rows due",
            count,
            extra={"event": "taskclaim.admin_outbox_retried", "count": count},
        )
        text = ngettext(
            "%(count)d row will be sent again.", "%(count)d rows will be sent again.", count
        ) % {"count": count}
        self.message_user(request, text, messages.SUCCESS)

    @admin.action(description=_("Delete selected rows"), permissions=("delete",))
    def delete_rows(self, request: HttpRequest, queryset: QuerySet[OutboxRow]) -> None:
        """Deletes the selected rows: their messages will never be sent."""
        event, log = "taskclaim.admin_outbox_deleted", "admin deleted %d outbox rows"
        deleted = delete_selected(queryset, request, event=event, log=log)
        text = ngettext("Deleted %(count)d row.", "Deleted %(count)d rows.", deleted)
        self.message_user(request, text % {"count": deleted}, messages.SUCCESS)
