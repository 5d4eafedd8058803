"""The Django admin for claims (and, through :mod:`.messages`, the
PostgreSQL queue's messages).

Built for tables of millions of rows: key search is a primary-key range,
counts are estimated above :data:`~.queries.EXACT_COUNT_LIMIT`, and
no page runs a full ``COUNT(*)``. Claims are read-only; releasing claims
and deleting expired ones need the ``delete_claim`` permission.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import URLPattern, path
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from astral_taskclaim.admin import views
from astral_taskclaim.admin.queries import (
    LargeTableAdmin,
    delete_selected,
    key_search,
    key_sorts_by_code_point,
)
from astral_taskclaim.admin.times import (
    relative_or_never,
    seconds_from_now,
    shown_time,
    with_safe_times,
)
from astral_taskclaim.models import Claim, ClaimQuerySet, FollowUp

logger = logging.getLogger(__name__)


class _ClaimStateFilter(admin.SimpleListFilter):
    """Active claims hold their key; expired ones wait for deletion. Judged
    by the database clock, like the claim SQL."""

    title = _("state")
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("active", _("active")), ("expired", _("expired"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        state = {"active": ClaimQuerySet.active, "expired": ClaimQuerySet.expired}.get(
            self.value() or ""
        )
        return state(queryset) if state else queryset  # type: ignore[arg-type]


class ClaimAdmin(LargeTableAdmin[Claim]):
    """Browse and search claims; release them or delete the expired ones."""

    list_display = ("key", "state", "expires_at_shown", "expires", "token")
    list_filter = (_ClaimStateFilter,)
    search_fields = ("key",)
    search_help_text = _("A key or the start of one (case-sensitive).")
    sortable_by = ("key", "expires_at_shown")
    ordering = ("expires_at",)
    fields = ("key", "state", "expires_at_shown", "expires", "token")
    readonly_fields = fields
    actions = ("release_claims",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Claim]:
        # Any expiry a row may hold, 'infinity' included, renders (and
        # "in 4 min" and the state follow the database clock).
        return with_safe_times(super().get_queryset(request), "expires_at")

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Claim | None:
        if "\x00" in object_id:
            # PostgreSQL text cannot hold NUL: no such claim, and no query.
            raise Http404(_("No claim has this key."))
        return super().get_object(request, object_id, from_field)

    def has_change_permission(self, request: HttpRequest, obj: Claim | None = None) -> bool:
        return False

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Claim], search_term: str
    ) -> tuple[QuerySet[Claim], bool]:
        """Keys equal to or starting with the whole term, spaces and all,
        through the primary-key index."""
        if not search_term:
            return queryset, False
        if "\x00" in search_term:
            # PostgreSQL text cannot hold NUL, so no key can match.
            return queryset.none(), False
        code_point_order = key_sorts_by_code_point(queryset.db)
        if not code_point_order:
            logger.warning(
                "claim keys do not sort by code point; key prefix search scans the table",
                extra={"event": "taskclaim.admin_key_search_unindexed"},
            )
        return queryset.filter(key_search(search_term, code_point_order=code_point_order)), False

    @admin.display(description=_("state"))
    def state(self, obj: Claim) -> str:
        """ "active" while the claim holds its key, then "expired"."""
        seconds = seconds_from_now(obj, "expires_at")
        if seconds is not None and seconds >= 0:
            return str(_("active"))
        return str(_("expired"))

    @admin.display(description=_("expires at"), ordering="expires_at")
    def expires_at_shown(self, obj: Claim) -> datetime | str | None:
        """When the claim ends; PostgreSQL's text for 'infinity' and other
        values beyond Python's dates."""
        return shown_time(obj, "expires_at")

    @admin.display(description=_("expires"), ordering="expires_at")
    def expires(self, obj: Claim) -> str:
        """The expiry relative to now: "in 4 min", "3 h ago", "never"."""
        seconds = seconds_from_now(obj, "expires_at")
        return "-" if seconds is None else relative_or_never(seconds)

    @admin.action(description=_("Release selected claims"), permissions=("delete",))
    def release_claims(self, request: HttpRequest, queryset: QuerySet[Claim]) -> None:
        """Frees the selected keys now: each can be claimed again at once."""
        event, log = "taskclaim.admin_claims_released", "admin released %d claims"
        released = delete_selected(queryset, request, event=event, log=log)
        self.message_user(
            request,
            ngettext("Released %(count)d claim.", "Released %(count)d claims.", released)
            % {"count": released},
            messages.SUCCESS,
        )

    def get_urls(self) -> list[URLPattern]:  # type: ignore[override]
        wrap = self.admin_site.admin_view
        extra = [
            path(
                "overview/",
                wrap(self.overview_view),
                name="astral_taskclaim_overview",
            ),
            path(
                "delete-expired/",
                wrap(self.delete_expired_view),
                name="astral_taskclaim_claim_delete_expired",
            ),
        ]
        return extra + super().get_urls()  # type: ignore[operator]

    def overview_view(self, request: HttpRequest) -> HttpResponse:
        """Counts of claims and messages and the expiry chart."""
        return views.overview(request, claim_admin=self)

    def delete_expired_view(self, request: HttpRequest) -> HttpResponse:
        """Confirms, then deletes every expired claim (``delete_claim``)."""
        return views.delete_expired(request, claim_admin=self)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        context = {
            "can_delete_expired": self.has_delete_permission(request),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context=context)


class FollowUpAdmin(LargeTableAdmin[FollowUp]):
    """Browse the keys' follow-up runs (``trailing``): pending ones wait
    for their key's claim to end. Read-only; deleting a pending one (the
    ``delete_followup`` permission) cancels it."""

    list_display = ("key", "pending", "created_at", "updated_at", "window_seconds", "token")
    search_fields = ("key",)
    search_help_text = _("A key or the start of one (case-sensitive).")
    sortable_by = ("key", "created_at")
    fields = (
        *("key", "token", "task", "window_seconds", "created_at", "updated_at", "taken_at"),
        *("debounce_seconds", "max_wait_seconds"),
    )
    readonly_fields = fields

    def has_change_permission(self, request: HttpRequest, obj: FollowUp | None = None) -> bool:
        return False

    @admin.display(description=_("pending"), boolean=True)
    def pending(self, obj: FollowUp) -> bool:
        return obj.taken_at is None

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[FollowUp], search_term: str
    ) -> tuple[QuerySet[FollowUp], bool]:
        """Keys starting with the whole term."""
        if not search_term or "\x00" in search_term:
            return (queryset.none() if search_term else queryset), False
        return queryset.filter(key__startswith=search_term), False
