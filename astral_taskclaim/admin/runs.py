"""The overview's charts of task runs by outcome, per minute of the last hour
and per half hour of the last day, Django Tasks and claimed tasks together.

"Retried" counts retried attempts at their error's time; "succeeded" and
"failed" count runs when they finished (cancelled with failed). Tasks
whose history is off are counted as far as it keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connections
from django.utils.translation import gettext

from astral_taskclaim.admin.chart import Chart, history_chart
from astral_taskclaim.db import sqlfiles

#: The outcomes, in their order from the axis up.
_OUTCOMES = ("succeeded", "retried", "failed")


@dataclass(frozen=True)
class _RunWindow:
    """A chart's span: ``buckets`` buckets of ``bucket_minutes`` up to now."""

    name: str
    buckets: int
    bucket_minutes: int


#: Per minute over the last hour; per half hour over the last day.
_WINDOWS = (_RunWindow("hour", 60, 1), _RunWindow("day", 48, 30))


@dataclass(frozen=True)
class RunChart:
    """A laid-out chart with its heading, its text alternative and totals."""

    name: str
    title: str
    description: str
    chart: Chart
    totals: list[tuple[str, str, int]]


def _outcome_labels() -> dict[str, str]:
    """Each outcome's label, in the current language."""
    return {
        "succeeded": gettext("succeeded"),
        "retried": gettext("retried"),
        "failed": gettext("failed"),
    }


def _run_history(using: str, window: _RunWindow) -> dict[str, list[int]]:
    """Runs per outcome in each bucket of ``window``, bucket 0 the latest:
    one statement (``admin/run_history.sql``)."""
    counts = {outcome: [0] * window.buckets for outcome in _OUTCOMES}
    with connections[using].cursor() as cursor:
        cursor.execute(
            sqlfiles.read("admin/run_history.sql"),
            {"bucket_seconds": window.bucket_minutes * 60, "buckets": window.buckets},
        )
        for bucket, outcome, runs in cursor.fetchall():
            # An event on a bound can round one bucket out: clamp, not drop.
            counts[outcome][min(max(bucket, 0), window.buckets - 1)] += runs
    return counts


def _title(window: _RunWindow) -> str:
    if window.bucket_minutes == 1:
        return gettext("Runs per minute, last %(minutes)d minutes") % {"minutes": window.buckets}
    return gettext("Runs per %(bucket)d minutes, last %(hours)g hours") % {
        "bucket": window.bucket_minutes,
        "hours": window.buckets * window.bucket_minutes / 60,
    }


def _run_chart(using: str, window: _RunWindow) -> RunChart:
    """The chart of ``window``, its heading and a sentence saying its totals."""
    labels = _outcome_labels()
    counts = _run_history(using, window)
    chart = history_chart(
        {outcome: (labels[outcome], counts[outcome]) for outcome in _OUTCOMES},
        bucket_minutes=window.bucket_minutes,
    )
    totals = [(outcome, labels[outcome], sum(counts[outcome])) for outcome in _OUTCOMES]
    title = _title(window)
    summary = ", ".join(f"{total} {label}" for _outcome, label, total in totals)
    description = gettext(
        "Stacked bars of runs of Django Tasks and claimed tasks by outcome, oldest at "
        "the left: %(summary)s. "
        "The table below holds the same numbers."
    ) % {"summary": summary}
    return RunChart(window.name, title, description, chart, totals)


def run_charts(using: str) -> list[RunChart]:
    """The last hour's and the last day's charts."""
    return [_run_chart(using, window) for window in _WINDOWS]
