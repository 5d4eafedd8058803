"""Admin pages beyond the changelists: the overview (counts, a chart of
what comes due over the next hours and charts of task runs by outcome,
Django Tasks and claimed tasks together) and "delete expired claims".

Both are served through :class:`~.claims.ClaimAdmin`'s ``get_urls``, so a
project's URLconf needs nothing beyond ``admin.site.urls``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from astral_taskclaim.admin.chart import timeline_chart
from astral_taskclaim.admin.messages import queue_names
from astral_taskclaim.admin.queries import Count, estimated_count
from astral_taskclaim.admin.runs import RunChart, run_charts
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.db.statements import Connector
from astral_taskclaim.models import Claim, QueueMessage, StoredTaskResult
from astral_taskclaim.queues.outbox import outbox_status

logger = logging.getLogger(__name__)

#: The chart covers this many buckets of :data:`_BUCKET_MINUTES` from now.
_BUCKETS = 12
_BUCKET_MINUTES = 30


@dataclass(frozen=True)
class _QueueCounts:
    """One queue's messages by state."""

    queue: str
    ready: Count
    delayed: Count
    leased: Count


def _timeline(using: str, path: str, params: dict[str, Any]) -> list[int]:
    counts = [0] * _BUCKETS
    rows = Connector(using).fetch(
        path, {"bucket_seconds": _BUCKET_MINUTES * 60, "buckets": _BUCKETS, **params}
    )
    for bucket, count in rows:
        # The database clock moves between the bounds and the bucket
        # arithmetic only by rounding; clamp rather than drop a row.
        counts[min(max(bucket, 0), _BUCKETS - 1)] += count
    return counts


def _claim_timeline(using: str) -> list[int]:
    """Claims expiring in each of the next :data:`_BUCKETS` buckets."""
    return _timeline(using, "admin/claim_timeline.sql", {})


def _message_timeline(using: str, queues: list[str]) -> list[int]:
    """Unleased messages of ``queues`` coming due in each bucket."""
    if not queues:
        return [0] * _BUCKETS
    return _timeline(using, "admin/message_timeline.sql", {"queues": queues})


def _queue_counts(using: str, queues: list[str]) -> list[_QueueCounts]:
    """Messages per queue and state; estimated for very long queues."""
    messages_ = QueueMessage.objects.using(using)
    return [
        _QueueCounts(
            queue=name,
            ready=estimated_count(messages_.for_queue(name).ready()),
            delayed=estimated_count(messages_.for_queue(name).delayed()),
            leased=estimated_count(messages_.for_queue(name).leased()),
        )
        for name in queues
    ]


def _viewable(site: admin.AdminSite, request: HttpRequest, model: type[Any]) -> bool:
    """Whether ``model`` has an admin on ``site`` that lets ``request``'s user view it."""
    return site.is_registered(model) and site.get_model_admin(model).has_view_permission(request)


def overview(request: HttpRequest, *, claim_admin: admin.ModelAdmin[Claim]) -> HttpResponse:
    """The overview page: claim and message counts, the due-times chart and
    the runs charts. Needs view permission on claims; message figures also
    need it on queue messages, the runs charts on task results."""
    if not claim_admin.has_view_permission(request):
        raise PermissionDenied
    using = app_settings.DATABASE
    claims = Claim.objects.using(using)
    series: dict[str, tuple[str, list[int]]] = {
        "claims": (str(_("claim expiries")), _claim_timeline(using)),
    }
    queues: list[_QueueCounts] | None = None
    if _viewable(claim_admin.admin_site, request, QueueMessage):
        names = queue_names(using)
        queues = _queue_counts(using, names)
        series["messages"] = (str(_("messages coming due")), _message_timeline(using, names))
    runs: list[RunChart] | None = None
    if _viewable(claim_admin.admin_site, request, StoredTaskResult):
        runs = run_charts(using)
    context = {
        **claim_admin.admin_site.each_context(request),
        "title": _("Task claims overview"),
        "opts": claim_admin.opts,
        "app_label": claim_admin.opts.app_label,
        "active": estimated_count(claims.active()),
        "expired": estimated_count(claims.expired()),
        "queues": queues,
        # Remote queues' outboxes: rows the relay has not sent yet.
        "outboxes": outbox_status(using=using),
        "chart": timeline_chart(series, bucket_minutes=_BUCKET_MINUTES),
        "hours": _BUCKETS * _BUCKET_MINUTES // 60,
        "run_charts": runs,
    }
    return TemplateResponse(request, "admin/astral_taskclaim/overview.html", context)


def delete_expired(request: HttpRequest, *, claim_admin: admin.ModelAdmin[Claim]) -> HttpResponse:
    """GET: how many claims have expired and a button; POST: deletes them
    all in one statement. Needs the ``delete_claim`` permission."""
    if not claim_admin.has_delete_permission(request):
        raise PermissionDenied
    using = app_settings.DATABASE
    changelist = reverse(f"{claim_admin.admin_site.name}:astral_taskclaim_claim_changelist")
    if request.method == "POST":
        with transaction.atomic(using=using):
            deleted = Connector(using).execute("admin/delete_expired.sql")
        logger.info(
            "admin deleted %d expired claims",
            deleted,
            extra={
                "event": "taskclaim.admin_expired_claims_deleted",
                "count": deleted,
                "user_id": request.user.pk,
            },
        )
        claim_admin.message_user(
            request,
            ngettext(
                "Deleted %(count)d expired claim.", "Deleted %(count)d expired claims.", deleted
            )
            % {"count": deleted},
            messages.SUCCESS,
        )
        return HttpResponseRedirect(changelist)
    context = {
        **claim_admin.admin_site.each_context(request),
        "title": _("Delete expired claims?"),
        "opts": claim_admin.opts,
        "app_label": claim_admin.opts.app_label,
        "expired": estimated_count(Claim.objects.using(using).expired()),
        "changelist_url": changelist,
    }
    return TemplateResponse(
        request, "admin/astral_taskclaim/claim/delete_expired_confirmation.html", context
    )
