"""Queries and bases of the admin that stay fast on tables of millions of rows.

:func:`key_search` makes a key prefix one primary-key range where keys sort
by code point; :func:`estimated_count` never runs a full ``COUNT(*)``;
:class:`ModelAdminOf` and :class:`LargeTableAdmin` are the app's admins'
bases.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Model, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.db.statements import Connector

_M = TypeVar("_M", bound=Model)

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

    _AdminOf = admin.ModelAdmin
    _PaginatorBase = Paginator[Any]
else:  # ModelAdmin and Paginator are generic only in the type stubs
    _PaginatorBase = Paginator

    class _AdminOf(admin.ModelAdmin):
        # ``SomeAdmin[SomeModel]`` is the class itself at runtime.
        def __class_getitem__(cls, model: Any) -> type:
            return cls


logger = logging.getLogger(__name__)

#: Exact counts are taken up to this many rows; above it, estimates.
EXACT_COUNT_LIMIT = 10_000

_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)

# Locales whose libc collation compares strings code point by code point.
_CODE_POINT_LOCALES = frozenset({"c", "posix", "c.utf8", "c.utf-8"})


def _prefix_upper_bound(prefix: str) -> str | None:
    """The least string above every string starting with ``prefix``, in
    code point order; ``None`` when there is none (empty or all U+10FFFF)."""
    chars = list(prefix)
    while chars:
        following = ord(chars.pop()) + 1
        if following in _SURROGATES:
            # PostgreSQL text is UTF-8, which cannot hold surrogates.
            following = _SURROGATES.stop
        if following <= _MAX_CODE_POINT:
            chars.append(chr(following))
            return "".join(chars)
    return None


def _sorts_by_code_point(provider: str, locale: str | None) -> bool:
    """Whether a collation (``pg_collation.collprovider`` and its locale)
    orders strings by code point: ``C``, ``POSIX``, ``C.UTF-8`` or the
    builtin provider of PostgreSQL 17+."""
    if provider == "b":
        return True
    return provider == "c" and (locale or "").lower() in _CODE_POINT_LOCALES


def key_sorts_by_code_point(using: str) -> bool:
    """Whether ``taskclaim.claim.key`` (and its index) sorts by code point
    in the database ``using``."""
    rows = Connector(using).fetch("admin/key_collation.sql")
    row = rows[0] if rows else None
    if row is None:  # pragma: no cover - the table always has the column
        return False
    return _sorts_by_code_point(row[0], row[1])


def key_search(term: str, *, code_point_order: bool) -> Q:
    """Keys equal to ``term`` or starting with it.

    With ``code_point_order`` the predicate is a range of the primary key
    (exact for any characters: ``%``, ``_`` and ``\\`` are plain values, not
    patterns). Under a linguistic collation a range would miss keys, so the
    prefix becomes an escaped ``LIKE`` and only the exact match uses the
    index."""
    if not isinstance(term, str):
        raise TypeError(f"term must be a str, got {type(term).__name__}")
    if not term:
        raise ValueError("term must not be empty")
    if not code_point_order:
        return Q(key=term) | Q(key__startswith=term)
    upper = _prefix_upper_bound(term)
    if upper is None:
        return Q(key__gte=term)
    return Q(key__gte=term, key__lt=upper)


@dataclass(frozen=True)
class Count:
    """A row count, ``exact`` or the planner's estimate."""

    value: int
    exact: bool


def _planner_rows(queryset: QuerySet[Any]) -> int:
    """The planner's estimate of the rows ``queryset`` returns."""
    plan = json.loads(queryset.order_by().explain(format="json"))
    return int(plan[0]["Plan"]["Plan Rows"])


def estimated_count(queryset: QuerySet[Any], *, exact_up_to: int = EXACT_COUNT_LIMIT) -> Count:
    """``queryset``'s row count: exact when at most ``exact_up_to`` (found
    by counting no more than ``exact_up_to + 1`` rows), else the planner's
    estimate, never below the rows already seen."""
    if isinstance(exact_up_to, bool) or not isinstance(exact_up_to, int):
        raise TypeError(f"exact_up_to must be an int, got {exact_up_to!r}")
    if exact_up_to < 0:
        raise ValueError(f"exact_up_to must be at least 0, got {exact_up_to}")
    seen = queryset.order_by().values("pk")[: exact_up_to + 1].count()
    if seen <= exact_up_to:
        return Count(seen, exact=True)
    return Count(max(_planner_rows(queryset), seen), exact=False)


def relative_time(seconds: float) -> str:
    """``seconds`` from now in words: "in 4 min", "3 h ago", "now".

    Rounded to the largest sensible unit: seconds below a minute, minutes
    below 90 minutes, hours below 36 hours, then days."""
    # Whole seconds first, so 59.7 s reads "1 min", never "60 s".
    magnitude = round(abs(seconds))
    if magnitude < 1:
        return gettext("now")
    if magnitude < 60:
        amount = gettext("%(count)d s") % {"count": magnitude}
    elif magnitude < 90 * 60:
        amount = gettext("%(count)d min") % {"count": round(magnitude / 60)}
    elif magnitude < 36 * 3600:
        amount = gettext("%(count)d h") % {"count": round(magnitude / 3600)}
    else:
        amount = gettext("%(count)d d") % {"count": round(magnitude / 86400)}
    if seconds > 0:
        return gettext("in %(amount)s") % {"amount": amount}
    return gettext("%(amount)s ago") % {"amount": amount}


#: A body or traceback is shown as stored up to this many characters, then cut.
_SHOWN_CHARS = 10_000


def preformatted(text: str, css_class: str) -> SafeString:
    """``text`` in a ``<pre>`` of ``css_class``, cut after
    :data:`_SHOWN_CHARS` characters with a note saying so."""
    if len(text) <= _SHOWN_CHARS:
        return format_html('<pre class="{}">{}</pre>', css_class, text)
    return format_html(
        '<pre class="{}">{}…</pre><p class="help">{}</p>',
        css_class,
        text[:_SHOWN_CHARS],
        gettext("Cut after %(shown)d of %(length)d characters.")
        % {"shown": _SHOWN_CHARS, "length": len(text)},
    )


class _EstimatedCountPaginator(_PaginatorBase):
    """A paginator counting exactly up to :data:`EXACT_COUNT_LIMIT` rows and
    estimating beyond; ``is_estimate`` has templates say "about"."""

    exact_up_to = EXACT_COUNT_LIMIT

    def _counted(self) -> Count:
        counted: Count | None = getattr(self, "_count_result", None)
        if counted is None:
            if isinstance(self.object_list, QuerySet):
                counted = estimated_count(self.object_list, exact_up_to=self.exact_up_to)
            else:
                counted = Count(len(self.object_list), exact=True)
            self._count_result = counted
        return counted

    @property
    def count(self) -> int:
        """Rows in the list: exact, or an estimate when ``is_estimate``."""
        return self._counted().value

    @property
    def is_estimate(self) -> bool:
        """Whether :attr:`count` is the planner's estimate."""
        return not self._counted().exact


class ModelAdminOf(_AdminOf[_M]):
    """The base of the app's model admins, ``ModelAdminOf[SomeModel]``
    (generic to the type checker only), reading from ``TASKCLAIM_DATABASE``
    whatever the routers say. ``detail_action`` (an action's name, a
    button's label) puts that action on each row's page as a button that
    POSTs ``_detail_action`` and runs it on that row."""

    detail_action: ClassVar[tuple[str, StrOrPromise] | None] = None

    def get_queryset(self, request: HttpRequest) -> QuerySet[_M]:
        return super().get_queryset(request).using(app_settings.DATABASE)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # the app's own code writes these rows

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A row's page is read-only (saving it would write back stale state);
        # on the list the permission guards the actions.
        return obj is None and super().has_change_permission(request)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        action = self._allowed_detail_action(request)
        if request.method == "POST" and "_detail_action" in request.POST:
            if action is None or not self.has_view_or_change_permission(request):
                raise PermissionDenied
            row = self.get_object(request, unquote(object_id))
            if row is None:
                raise Http404
            action(request, self.get_queryset(request).filter(pk=row.pk))
            return HttpResponseRedirect(request.get_full_path())
        label = None if action is None or self.detail_action is None else self.detail_action[1]
        context = {**(extra_context or {}), "detail_action": label}
        return super().change_view(request, object_id, form_url, context)

    def _allowed_detail_action(self, request: HttpRequest) -> Callable[..., Any] | None:
        """The :attr:`detail_action`, bound, if ``request``'s user may take
        it (as Django decides for the action list: any of its permissions)."""
        if self.detail_action is None:
            return None
        action: Callable[..., Any] = getattr(self, self.detail_action[0])
        needed = getattr(action, "allowed_permissions", ())
        if needed and not any(getattr(self, f"has_{p}_permission")(request) for p in needed):
            return None
        return action


class LargeTableAdmin(ModelAdminOf[_M]):
    """The base of an admin of a table of millions of rows: estimated
    counts, no facets, 100 rows a page, and no "delete selected" (whose
    confirmation lists every row; see :func:`delete_selected`)."""

    list_per_page = 100
    list_max_show_all = 500
    paginator: ClassVar[type] = _EstimatedCountPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER

    class Media:
        # Long keys, tokens and errors wrap, so every column fits 1280 px.
        css: ClassVar[dict[str, tuple[str, ...]]] = {"all": ("astral_taskclaim/changelist.css",)}

    def get_actions(self, request: HttpRequest, action_location: Any = None) -> dict[str, Any]:
        # ``action_location`` exists from Django 6.1 on; pass it on only then.
        where = {} if action_location is None else {"action_location": action_location}
        actions = super().get_actions(request, **where)
        actions.pop("delete_selected", None)
        return actions


def delete_selected(queryset: QuerySet[Any], request: HttpRequest, *, event: str, log: str) -> int:
    """Deletes an action's selection in one transaction, logs ``log``
    (``%d``: how many) as ``event``, and returns how many: by primary key,
    so the changelist's annotations never reach the ``DELETE``."""
    database = queryset.db
    with transaction.atomic(using=database):
        deleted: int = (
            queryset.model._default_manager.using(database)
            .filter(pk__in=queryset.values("pk"))
            .delete()[0]
        )
    extra = {"event": event, "count": deleted, "user_id": request.user.pk}
    logger.info(log, deleted, extra=extra)
    return deleted


def id_or_key(queryset: QuerySet[Any], search_term: str) -> QuerySet[Any] | None:
    """``queryset``'s rows whose id (a UUID) or exact ``key`` is
    ``search_term``; ``None`` for an empty term (no search)."""
    term = search_term.strip()
    if not term:
        return None
    match = Q(key=term)
    with contextlib.suppress(ValueError):  # not an id: the key alone
        match |= Q(pk=uuid.UUID(term))
    return queryset.filter(match)
