"""The overview chart's layout: scale, bar geometry, labels and bad input."""

from __future__ import annotations

import pytest

from astral_taskclaim.admin.chart import HEIGHT, bucket_label, nice_ceiling, timeline_chart


@pytest.mark.parametrize(
    ("value", "top"),
    [(0, 1), (1, 1), (2, 2), (3, 5), (7, 10), (10, 10), (11, 20), (999, 1000), (1001, 2000)],
)
def test_nice_ceiling(value, top):
    assert nice_ceiling(value) == top


def test_bucket_labels():
    assert bucket_label(0, bucket_minutes=30) == "in 0-30 min"
    assert bucket_label(2, bucket_minutes=30) == "in 60-90 min"
    assert bucket_label(3, bucket_minutes=30) == "in 1.5-2 h"


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
    assert chart.plot_bottom < HEIGHT


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
def test_bad_input_is_refused(series, minutes, error, match):
    with pytest.raises(error, match=match):
        timeline_chart(series, bucket_minutes=minutes)
