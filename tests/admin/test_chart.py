"""The overview chart's layout: scale, bar geometry, labels and bad input."""

from __future__ import annotations

from itertools import pairwise

import pytest

from astral_taskclaim.admin.chart import (
    _HEIGHT,
    _bucket_label,
    _nice_ceiling,
    _past_bucket_label,
    history_chart,
    timeline_chart,
)


@pytest.mark.parametrize(
    ("value", "top"),
    [(0, 1), (1, 1), (2, 2), (3, 5), (7, 10), (10, 10), (11, 20), (999, 1000), (1001, 2000)],
)
def test_nice_ceiling(value, top):
    assert _nice_ceiling(value) == top


def test_bucket_labels():
    assert _bucket_label(0, bucket_minutes=30) == "in 0-30 min"
    assert _bucket_label(2, bucket_minutes=30) == "in 60-90 min"
    assert _bucket_label(3, bucket_minutes=30) == "in 1.5-2 h"


def test_bars_scale_to_the_tallest_and_sit_on_the_axis():
    chart = timeline_chart(
        {"claims": ("claim expiries", [10, 0, 5]), "messages": ("messages", [2, 4, 0])},
        bucket_minutes=30,
    )

    assert len(chart.bars) == 6
    tallest = max(chart.bars, key=lambda bar: bar.height)
    assert (tallest.series, tallest.count) == ("claims", 10)
    assert tallest.y == chart.plot_top
    for bar in chart.bars:
        assert bar.y + bar.height == pytest.approx(chart.plot_bottom)
        assert bar.height == pytest.approx(tallest.height * bar.count / 10)
    xs = [bar.x for bar in chart.bars]
    assert xs == sorted(xs)  # bucket by bucket, series side by side
    assert chart.bars[0].title == "claim expiries, in 0-30 min: 10"
    assert [tick.label for tick in chart.y_ticks] == ["0", "5", "10"]
    assert [tick.label for tick in chart.x_ticks] == ["now", "+1 h"]
    assert chart.rows[1] == ("in 30-60 min", [0, 4])
    assert chart.total == 21
    assert chart.plot_bottom < _HEIGHT


def test_empty_chart_has_a_unit_scale():
    chart = timeline_chart({"claims": ("claims", [0, 0])}, bucket_minutes=60)

    assert {bar.height for bar in chart.bars} == {0}
    assert [tick.label for tick in chart.y_ticks] == ["0", "1"]


def test_large_counts_get_grouped_axis_labels():
    chart = timeline_chart({"claims": ("claims", [1_000_000])}, bucket_minutes=30)

    assert [tick.label for tick in chart.y_ticks] == ["0", "500,000", "1,000,000"]


@pytest.mark.parametrize(
    ("series", "minutes", "error", "match"),
    [
        ({"a": ("a", [1])}, 0, ValueError, "bucket_minutes must be positive"),
        ({"a": ("a", [1])}, True, TypeError, "bucket_minutes must be an int"),
        ({"a": ("a", [1]), "b": ("b", [1, 2])}, 30, ValueError, "same, non-zero"),
        ({"a": ("a", [])}, 30, ValueError, "same, non-zero"),
    ],
)
@pytest.mark.parametrize("layout", [timeline_chart, history_chart])
def test_bad_input_is_refused(series, minutes, error, match, layout):
    with pytest.raises(error, match=match):
        layout(series, bucket_minutes=minutes)


def test_past_bucket_labels():
    assert _past_bucket_label(0, bucket_minutes=1) == "0-1 min ago"
    assert _past_bucket_label(59, bucket_minutes=1) == "59-60 min ago"
    assert _past_bucket_label(2, bucket_minutes=30) == "60-90 min ago"
    assert _past_bucket_label(47, bucket_minutes=30) == "23.5-24 h ago"


def test_history_stacks_each_bucket_oldest_at_the_left():
    chart = history_chart(
        {
            "succeeded": ("succeeded", [6, 0, 2]),
            "retried": ("retried", [3, 0, 0]),
            "failed": ("failed", [1, 0, 0]),
        },
        bucket_minutes=1,
    )

    # Zero counts draw nothing: four segments in two bars.
    assert [(bar.series, bar.count) for bar in chart.bars] == [
        ("succeeded", 6), ("retried", 3), ("failed", 1), ("succeeded", 2),
    ]  # fmt: skip
    latest = chart.bars[:3]
    assert {bar.x for bar in latest} == {latest[0].x}
    assert latest[0].y + latest[0].height == pytest.approx(chart.plot_bottom)
    for lower, upper in pairwise(latest):
        assert upper.y + upper.height == pytest.approx(lower.y)
    assert latest[2].y == pytest.approx(chart.plot_top)  # the total, 10, is the top
    oldest = chart.bars[3]
    assert oldest.x < latest[0].x
    assert latest[0].x + latest[0].width < chart.plot_right
    assert oldest.title == "succeeded, 2-3 min ago: 2"
    assert chart.rows[0] == ("2-3 min ago", [2, 0, 0])
    assert chart.rows[-1] == ("0-1 min ago", [6, 3, 1])
    assert chart.total == 12


@pytest.mark.parametrize(
    ("buckets", "minutes", "labels"),
    [
        (60, 1, ["60 min ago", "50 min ago", "40 min ago", "30 min ago", "20 min ago",
                 "10 min ago", "now"]),
        (48, 30, ["24 h ago", "20 h ago", "16 h ago", "12 h ago", "8 h ago", "4 h ago", "now"]),
    ],
)  # fmt: skip
def test_history_axis_labels_stay_few_and_end_at_now(buckets, minutes, labels):
    chart = history_chart({"runs": ("runs", [0] * buckets)}, bucket_minutes=minutes)

    assert [tick.label for tick in chart.x_ticks] == labels
    assert chart.x_ticks[0].x == chart.plot_left
    assert chart.x_ticks[-1].x == chart.plot_right
    assert chart.bars == []
