"""The admin for the PostgreSQL queue's messages (``taskclaim.message``).

Messages are read-only; "run now" (make delayed messages visible) needs
``change_queuemessage`` and deleting needs ``delete_queuemessage``. Leased
messages are never made visible early: a consumer is running them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from astral_taskclaim.admin.queries import (
    EXACT_COUNT_LIMIT,
    LargeTableAdmin,
    delete_selected,
    estimated_count,
    preformatted,
)
from astral_taskclaim.admin.times import (
    relative_or_never,
    seconds_from_now,
    shown_time,
    with_safe_times,
)
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.db.statements import Connector
from astral_taskclaim.models import QueueMessage, QueueMessageQuerySet

logger = logging.getLogger(__name__)

_RUN_NOW_CHUNK = 10_000
#: The message's timestamp columns, read through :func:`.with_safe_times`.
_TIMES = ("visible_at", "enqueued_at", "leased_at")
# What _payload() gives for a body Python cannot decode.
_UNREADABLE = object()


def queue_names(using: str) -> list[str]:
    """The queue names that have messages, in order (an index hop per name)."""
    return [row[0] for row in Connector(using).fetch("queue/message_queues.sql")]


def _message_state(obj: QueueMessage) -> str:
    """``"ready"``, ``"delayed"`` or ``"leased"`` now, as the queryset
    methods of :class:`~.models.QueueMessageQuerySet` judge it (by the
    database clock for the admin's rows)."""
    due_in = seconds_from_now(obj, "visible_at")
    if due_in is not None and due_in <= 0:
        return "ready"
    return "delayed" if obj.lease is None else "leased"


def _chunks(values: Sequence[int], size: int) -> Iterator[list[int]]:
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


class _MessageQueueFilter(admin.SimpleListFilter):
    """Messages of one queue (its ``queue_name``)."""

    title = _("queue")
    parameter_name = "queue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(name, name) for name in queue_names(app_settings.DATABASE)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.for_queue(value) if value else queryset  # type: ignore[attr-defined]


class _MessageStateFilter(admin.SimpleListFilter):
    """Ready (receivable now), delayed (waiting out a delay) or leased (a
    consumer holds it), by the database clock."""

    title = _("state")
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("ready", _("ready")), ("delayed", _("delayed")), ("leased", _("leased"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        states = {
            "ready": QueueMessageQuerySet.ready,
            "delayed": QueueMessageQuerySet.delayed,
            "leased": QueueMessageQuerySet.leased,
        }
        state = states.get(self.value() or "")
        return state(queryset) if state else queryset  # type: ignore[arg-type]


def _payload(obj: QueueMessage) -> Any:
    # Valid JSON may nest deeper than Python's decoder goes (PostgreSQL's
    # json check accepts it): such a body has no payload to show.
    try:
        return obj.payload
    except (ValueError, RecursionError):
        return _UNREADABLE


def _raw_body(obj: QueueMessage) -> SafeString:
    return preformatted(obj.body, "taskclaim-body")


class QueueMessageAdmin(LargeTableAdmin[QueueMessage]):
    """Browse queued messages by queue and state; run delayed ones now or
    delete them."""

    list_display = (
        "id",
        "queue",
        "claim_key",
        "attempts",
        "due",
        "last_error",
        "enqueued_at_shown",
    )
    list_filter = (_MessageQueueFilter, _MessageStateFilter)
    sortable_by = ("id", "visible_at")
    ordering = ("visible_at", "id")
    fields = (
        "id",
        "queue",
        "claim_key",
        "attempts",
        "last_error",
        "priority",
        "due",
        "visible_at_shown",
        "enqueued_at_shown",
        "leased_at_shown",
        "lease",
        "task",
        "raw_body",
    )
    actions = ("run_now", "delete_messages")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[QueueMessage]:
        # Any time a row may hold, 'infinity' included, renders (and states
        # and "due in 2 min" follow the database clock).
        return with_safe_times(super().get_queryset(request), *_TIMES)

    def has_run_permission(self, request: HttpRequest) -> bool:
        """Whether the user may make messages visible now."""
        return super().has_change_permission(request)

    @admin.display(description=_("claim key"))
    def claim_key(self, obj: QueueMessage) -> str | SafeString:
        """The key of the envelope's claim, linked to the claim when the
        user may see claims."""
        payload = _payload(obj)
        key = payload.get("key") if isinstance(payload, dict) else None
        if not isinstance(key, str):
            return "-"
        try:
            url = reverse("admin:astral_taskclaim_claim_change", args=(quote(key),))
        except NoReverseMatch:  # pragma: no cover - the claim admin is registered with us
            return key
        return format_html('<a href="{}">{}</a>', url, key)

    @admin.display(description=_("state"))
    def state(self, obj: QueueMessage) -> str:
        """Ready, delayed or leased, by the database clock."""
        return str(
            {"ready": _("ready"), "delayed": _("delayed"), "leased": _("leased")}[
                _message_state(obj)
            ]
        )

    @admin.display(description=_("visible"), ordering="visible_at")
    def due(self, obj: QueueMessage) -> str:
        """ "leased", "due in 2 min", "never" or "ready" once receivable."""
        state = _message_state(obj)
        if state == "leased":
            return str(_("leased"))
        if state == "ready":
            return str(_("ready"))
        due_in = seconds_from_now(obj, "visible_at")
        assert due_in is not None  # visible_at is NOT NULL
        if due_in == float("inf"):
            return str(_("never"))
        return str(_("due %(when)s")) % {"when": relative_or_never(due_in)}

    @admin.display(description=_("visible at"), ordering="visible_at")
    def visible_at_shown(self, obj: QueueMessage) -> datetime | str | None:
        """When the message may be received (the end of its delay or lease)."""
        return shown_time(obj, "visible_at")

    @admin.display(description=_("enqueued at"), ordering="enqueued_at")
    def enqueued_at_shown(self, obj: QueueMessage) -> datetime | str | None:
        """When the message was sent."""
        return shown_time(obj, "enqueued_at")

    @admin.display(description=_("leased at"))
    def leased_at_shown(self, obj: QueueMessage) -> datetime | str | None:
        """When the current lease began."""
        return shown_time(obj, "leased_at")

    @admin.display(description=_("task"))
    def task(self, obj: QueueMessage) -> SafeString:
        """The envelope's task as indented JSON (escaped: shown, not run);
        a body that is not JSON Python can read, as its raw text."""
        payload = _payload(obj)
        if payload is _UNREADABLE:
            return _raw_body(obj)
        task = payload.get("task") if isinstance(payload, dict) else payload
        try:
            text = json.dumps(task, indent=2, ensure_ascii=False)
        except RecursionError:
            return _raw_body(obj)
        return format_html('<pre class="taskclaim-json">{}</pre>', text)

    @admin.display(description=_("body"))
    def raw_body(self, obj: QueueMessage) -> SafeString:
        """The message's JSON as stored, cut as :func:`~.queries.preformatted` cuts."""
        return _raw_body(obj)

    @admin.action(description=_("Run selected messages now"), permissions=("run",))
    def run_now(self, request: HttpRequest, queryset: QuerySet[QueueMessage]) -> None:
        """Makes the selected delayed messages visible at once and wakes
        their queues' consumers; leased and ready ones are left alone."""
        database = queryset.db
        ids = list(queryset.order_by().values_list("pk", flat=True))
        made_visible = 0
        connector = Connector(database)
        with transaction.atomic(using=database):
            for chunk in _chunks(ids, _RUN_NOW_CHUNK):
                rows = connector.fetch("queue/run_now.sql", {"ids": chunk})
                made_visible += sum(row[1] for row in rows)
        logger.info(
            "admin made %d messages visible",
            made_visible,
            extra={
                "event": "taskclaim.admin_messages_run_now",
                "count": made_visible,
                "user_id": request.user.pk,
            },
        )
        skipped = len(ids) - made_visible
        text = ngettext(
            "%(count)d message will run now.", "%(count)d messages will run now.", made_visible
        ) % {"count": made_visible}
        if skipped:
            text += " " + ngettext(
                "%(count)d was leased or already ready, so left alone.",
                "%(count)d were leased or already ready, so left alone.",
                skipped,
            ) % {"count": skipped}
        self.message_user(request, text, messages.SUCCESS)

    @admin.action(description=_("Delete selected messages"), permissions=("delete",))
    def delete_messages(
        self, request: HttpRequest, queryset: QuerySet[QueueMessage]
    ) -> TemplateResponse | None:
        """Asks once, then deletes the selected messages (their tasks will
        not run; their claims hold their keys until the windows end)."""
        if request.POST.get("post") != "yes":
            count = estimated_count(queryset, exact_up_to=EXACT_COUNT_LIMIT)
            context = {
                **self.admin_site.each_context(request),
                "title": _("Delete queue messages?"),
                "opts": self.opts,
                "count": count,
                "sample": list(queryset[:20]),
                "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
                "select_across": request.POST.get("select_across", "0"),
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
                "preserved_query": request.GET.urlencode(),
            }
            return TemplateResponse(
                request, "admin/astral_taskclaim/queuemessage/delete_confirmation.html", context
            )
        event, log = "taskclaim.admin_messages_deleted", "admin deleted %d queue messages"
        deleted = delete_selected(queryset, request, event=event, log=log)
        self.message_user(
            request,
            ngettext("Deleted %(count)d message.", "Deleted %(count)d messages.", deleted)
            % {"count": deleted},
            messages.SUCCESS,
        )
        return None
