"""Timestamps the admin can show whatever a row holds.

``timestamptz`` admits values Python cannot load (``infinity``, years past
9999), and one such row would make a changelist an error page. So
:func:`with_safe_times` defers each column ``c`` and annotates ``c_shown``
(the value if in years 2-9997, else ``NULL``), ``c_text`` (PostgreSQL's
text of it) and ``c_in`` (seconds from now, ``±inf`` for the infinities).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.db.models import (
    Case,
    DateTimeField,
    F,
    FloatField,
    Func,
    Model,
    QuerySet,
    TextField,
    When,
)
from django.db.models.functions import Cast
from django.utils import timezone
from django.utils.translation import gettext

from astral_taskclaim.admin.queries import relative_time

_M = TypeVar("_M", bound=Model)

#: Values in [_SHOWN_FROM, _SHOWN_UNTIL) load into a ``datetime`` and stay one
#: after conversion to any time zone (at most 14 hours either way).
_SHOWN_FROM = datetime(2, 1, 1, tzinfo=UTC)
_SHOWN_UNTIL = datetime(9998, 1, 1, tzinfo=UTC)


class _SecondsFromNow(Func):
    """Seconds from ``statement_timestamp()`` to a timestamp, exact to the
    microsecond before the cast: ``extract`` gives ``numeric`` (infinite for
    the infinities), where subtracting the timestamps themselves fails for
    ``'infinity'`` before PostgreSQL 17."""

    template = (
        "(extract(epoch FROM %(expressions)s) - extract(epoch FROM statement_timestamp()))::float8"
    )
    output_field = FloatField()


def with_safe_times(queryset: QuerySet[_M], *fields: str) -> QuerySet[_M]:
    """``queryset`` with ``fields`` (timestamp columns) deferred and their
    ``_shown``, ``_text`` and ``_in`` annotations (module docstring)."""
    annotations: dict[str, Any] = {}
    for field in fields:
        in_range = {f"{field}__gte": _SHOWN_FROM, f"{field}__lt": _SHOWN_UNTIL}
        annotations[f"{field}_shown"] = Case(
            When(**in_range, then=F(field)), default=None, output_field=DateTimeField()
        )
        annotations[f"{field}_text"] = Cast(field, TextField())
        annotations[f"{field}_in"] = _SecondsFromNow(F(field))
    annotated: QuerySet[_M] = queryset.defer(*fields).annotate(**annotations)
    return annotated


def seconds_from_now(obj: Model, field: str) -> float | None:
    """Seconds from now to ``obj``'s ``field`` (``None`` when it is NULL):
    the annotation when there is one, else this process's clock."""
    if f"{field}_in" in obj.__dict__:
        seconds: float | None = obj.__dict__[f"{field}_in"]
        return seconds
    value: datetime | None = getattr(obj, field)
    return None if value is None else (value - timezone.now()).total_seconds()


def shown_time(obj: Model, field: str) -> datetime | str | None:
    """``obj``'s ``field`` for display: a ``datetime`` (the admin formats it
    in the current time zone) or, out of Python's range, PostgreSQL's text."""
    if f"{field}_shown" not in obj.__dict__:
        loaded: datetime | None = getattr(obj, field)
        return loaded
    shown: datetime | None = obj.__dict__[f"{field}_shown"]
    if shown is not None:
        return shown
    text: str | None = obj.__dict__[f"{field}_text"]
    return text


def relative_or_never(seconds: float) -> str:
    """:func:`relative_time`, with words for the infinities."""
    if math.isinf(seconds):
        return gettext("never") if seconds > 0 else gettext("long ago")
    return relative_time(seconds)
