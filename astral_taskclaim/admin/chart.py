"""Bar charts laid out in Python and drawn as inline SVG by the overview
template: no scripts, readable without JavaScript and printable.

:func:`timeline_chart` takes per-bucket counts of each series (claim
expiries, message due times) from now on and groups them side by side;
:func:`history_chart` stacks per-bucket counts of the past (runs by
outcome) up to now. Both return the geometry of every bar, axis tick and
label; the template only places them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.utils.translation import gettext

_WIDTH = 720
_HEIGHT = 260
_LEFT = 56
_RIGHT = 12
_TOP = 16
_BOTTOM = 40


@dataclass(frozen=True)
class _Bar:
    """One bar: its box, its series (a CSS class) and its tooltip."""

    x: float
    y: float
    width: float
    height: float
    series: str
    count: int
    title: str


@dataclass(frozen=True)
class _Tick:
    """An axis label at ``x``, ``y``; ``line`` draws a grid line there."""

    x: float
    y: float
    label: str
    line: bool = False


@dataclass(frozen=True)
class Chart:
    """Everything the template draws, plus the rows of its table twin."""

    bars: list[_Bar]
    x_ticks: list[_Tick]
    y_ticks: list[_Tick]
    series: list[tuple[str, str]]
    rows: list[tuple[str, list[int]]]
    total: int
    # Every chart has the same box: the template sizes the SVG from these.
    width: int = _WIDTH
    height: int = _HEIGHT
    plot_left: float = float(_LEFT)
    plot_right: float = float(_WIDTH - _RIGHT)
    plot_top: float = float(_TOP)
    plot_bottom: float = float(_HEIGHT - _BOTTOM)


def _nice_ceiling(value: int) -> int:
    """The least of 1, 2 or 5 times a power of ten at or above ``value``: the
    top of the y axis, so grid lines fall on round numbers."""
    if value <= 1:
        return 1
    magnitude = 1
    while magnitude * 10 < value:
        magnitude *= 10
    for step in (1, 2, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude  # pragma: no cover - the loop always returns


def _axis_number(value: float) -> str:
    return f"{int(value):,}" if value == int(value) else f"{value:,.1f}"


def _y_ticks(top: int) -> list[_Tick]:
    plot_top, plot_bottom = float(_TOP), float(_HEIGHT - _BOTTOM)
    return [
        _Tick(
            x=_LEFT - 6,
            y=round(plot_bottom - (plot_bottom - plot_top) * fraction, 2),
            label=_axis_number(top * fraction),
            line=True,
        )
        for fraction in ((0.0, 0.5, 1.0) if top > 1 else (0.0, 1.0))
    ]


def _check_series(series: Mapping[str, tuple[str, Sequence[int]]], bucket_minutes: int) -> int:
    """The number of buckets of ``series``, once the arguments passed."""
    if isinstance(bucket_minutes, bool) or not isinstance(bucket_minutes, int):
        raise TypeError(f"bucket_minutes must be an int, got {bucket_minutes!r}")
    if bucket_minutes <= 0:
        raise ValueError(f"bucket_minutes must be positive, got {bucket_minutes}")
    lengths = {len(counts) for _label, counts in series.values()}
    if len(lengths) != 1 or 0 in lengths:
        raise ValueError("every series needs the same, non-zero number of buckets")
    return lengths.pop()


def _bucket_label(index: int, *, bucket_minutes: int) -> str:
    """The span of bucket ``index`` from now, e.g. "in 30-60 min"."""
    start, end = index * bucket_minutes, (index + 1) * bucket_minutes
    if end <= 90:
        return gettext("in %(start)d-%(end)d min") % {"start": start, "end": end}
    return gettext("in %(start)s-%(end)s h") % {
        "start": f"{start / 60:g}",
        "end": f"{end / 60:g}",
    }


def timeline_chart(
    series: Mapping[str, tuple[str, Sequence[int]]],
    *,
    bucket_minutes: int,
) -> Chart:
    """Lays out ``series`` (key → (label, counts per bucket), all the same
    length) as grouped bars, bucket 0 starting now."""
    buckets = _check_series(series, bucket_minutes)
    top = _nice_ceiling(max(max(counts) for _label, counts in series.values()))
    plot_left, plot_right = float(_LEFT), float(_WIDTH - _RIGHT)
    plot_top, plot_bottom = float(_TOP), float(_HEIGHT - _BOTTOM)
    slot = (plot_right - plot_left) / buckets
    bar_width = slot * 0.8 / len(series)

    spans = [
        (index, _bucket_label(index, bucket_minutes=bucket_minutes)) for index in range(buckets)
    ]
    bars: list[_Bar] = []
    for index, span in spans:
        for offset, (key, (label, counts)) in enumerate(series.items()):
            count = counts[index]
            height = (plot_bottom - plot_top) * count / top
            bars.append(
                _Bar(
                    x=round(plot_left + slot * index + slot * 0.1 + bar_width * offset, 2),
                    y=round(plot_bottom - height, 2),
                    width=round(bar_width, 2),
                    height=round(height, 2),
                    series=key,
                    count=count,
                    title=f"{label}, {span}: {count}",
                )
            )

    x_ticks: list[_Tick] = []
    # A label every hour keeps them from overlapping at any bucket size.
    every = max(1, 60 // bucket_minutes)
    for index in range(0, buckets + 1, every):
        hours = index * bucket_minutes / 60
        label = gettext("now") if index == 0 else f"+{hours:g} h"
        x_ticks.append(_Tick(x=round(plot_left + slot * index, 2), y=plot_bottom + 18, label=label))
    return _chart(series, top=top, bars=bars, x_ticks=x_ticks, spans=spans)


def _chart(
    series: Mapping[str, tuple[str, Sequence[int]]],
    *,
    top: int,
    bars: list[_Bar],
    x_ticks: list[_Tick],
    spans: Sequence[tuple[int, str]],
) -> Chart:
    """The chart of ``series`` with ``bars`` and ``x_ticks`` laid out, the y
    axis up to ``top``, and its table's rows: one per bucket of ``spans``
    (bucket index, its label), in that order."""
    return Chart(
        bars=bars,
        x_ticks=x_ticks,
        y_ticks=_y_ticks(top),
        series=[(key, label) for key, (label, _counts) in series.items()],
        rows=[
            (span, [counts[index] for _label, counts in series.values()]) for index, span in spans
        ],
        total=sum(sum(counts) for _label, counts in series.values()),
    )


def _past_bucket_label(ago: int, *, bucket_minutes: int) -> str:
    """The span of the bucket ``ago`` buckets before now, e.g. "3-4 min ago"."""
    start, end = ago * bucket_minutes, (ago + 1) * bucket_minutes
    if end <= 90:
        return gettext("%(start)d-%(end)d min ago") % {"start": start, "end": end}
    return gettext("%(start)s-%(end)s h ago") % {"start": f"{start / 60:g}", "end": f"{end / 60:g}"}


def _ago_label(minutes: int) -> str:
    if minutes == 0:
        return gettext("now")
    if minutes < 90:
        return gettext("%(count)d min ago") % {"count": minutes}
    return gettext("%(count)s h ago") % {"count": f"{minutes / 60:g}"}


#: Minutes between x-axis labels: the least that gives at most seven.
_LABEL_STEPS = (1, 5, 10, 15, 30, 60, 120, 180, 240, 360, 720, 1440)


def history_chart(
    series: Mapping[str, tuple[str, Sequence[int]]],
    *,
    bucket_minutes: int,
) -> Chart:
    """Lays out ``series`` (key → (label, counts per bucket), all the same
    length, bucket 0 the latest) as stacked bars: one bar per bucket, the
    oldest at the left, the latest ending at now; each bar stacks the series
    in their order from the axis up. A bar per bucket stays wide enough to
    read at 60 buckets, where grouped bars would be slivers."""
    buckets = _check_series(series, bucket_minutes)
    totals = [sum(counts[ago] for _label, counts in series.values()) for ago in range(buckets)]
    top = _nice_ceiling(max(totals))
    plot_left, plot_right = float(_LEFT), float(_WIDTH - _RIGHT)
    plot_top, plot_bottom = float(_TOP), float(_HEIGHT - _BOTTOM)
    slot = (plot_right - plot_left) / buckets

    spans = [
        (ago, _past_bucket_label(ago, bucket_minutes=bucket_minutes)) for ago in range(buckets)
    ]
    bars: list[_Bar] = []
    for ago, span in spans:
        base = plot_bottom
        for key, (label, counts) in series.items():
            count = counts[ago]
            if not count:
                continue
            height = (plot_bottom - plot_top) * count / top
            base -= height
            bars.append(
                _Bar(
                    x=round(plot_left + slot * (buckets - 1 - ago) + slot * 0.1, 2),
                    y=round(base, 2),
                    width=round(slot * 0.8, 2),
                    height=round(height, 2),
                    series=key,
                    count=count,
                    title=f"{label}, {span}: {count}",
                )
            )

    span_minutes = buckets * bucket_minutes
    step = next((each for each in _LABEL_STEPS if span_minutes <= 6 * each), span_minutes)
    x_ticks = [
        _Tick(
            x=round(plot_right - (plot_right - plot_left) * minutes / span_minutes, 2),
            y=plot_bottom + 18,
            label=_ago_label(minutes),
        )
        for minutes in range(span_minutes - span_minutes % step, -1, -step)
    ]
    return _chart(series, top=top, bars=bars, x_ticks=x_ticks, spans=spans[::-1])
