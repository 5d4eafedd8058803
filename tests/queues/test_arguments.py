"""The queue methods' argument checks every backend uses."""

from __future__ import annotations

import pytest

from astral_taskclaim.queues import options as arguments


@pytest.mark.parametrize(("delay", "seconds"), [(0, 0.0), (0.25, 0.25), (43_200, 43_200.0)])
def test_a_delay_in_range_is_kept_as_a_float(delay: float, seconds: float) -> None:
    assert arguments.delay_seconds(delay, 43_200) == seconds
    assert type(arguments.delay_seconds(delay, 43_200)) is float


@pytest.mark.parametrize(
    ("delay", "seconds"), [(0, 0), (0.001, 1), (1, 1), (29.5, 30), (43_200, 43_200)]
)
def test_whole_second_delays_round_up(delay: float, seconds: int) -> None:
    assert arguments.whole_delay_seconds(delay, 43_200) == seconds


@pytest.mark.parametrize("check", [arguments.delay_seconds, arguments.whole_delay_seconds])
@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (-0.1, ValueError, r"delay_seconds must be in \[0, 43200\], got -0.1"),
        (43_200.5, ValueError, r"in \[0, 43200\], got 43200.5"),
        (float("inf"), ValueError, "got inf"),
        (float("nan"), ValueError, "got nan"),
        (True, TypeError, "delay_seconds must be a number, got True"),
        ("5", TypeError, "got '5'"),
    ],
)
def test_a_bad_delay_is_named(check: object, value: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        check(value, 43_200)  # type: ignore[operator]


def test_max_messages_is_an_int_within_the_limit() -> None:
    assert arguments.max_messages(1, 10) == 1
    assert arguments.max_messages(10, 10) == 10
    for bad, error, message in (
        (0, ValueError, "max_messages must be from 1 to 10, got 0"),
        (11, ValueError, "got 11"),
        (True, TypeError, "max_messages must be an int, got True"),
        (2.0, TypeError, "got 2.0"),
    ):
        with pytest.raises(error, match=message):
            arguments.max_messages(bad, 10)


def test_wait_seconds_is_a_finite_number_from_0() -> None:
    assert arguments.wait_seconds(0) == 0.0
    assert arguments.wait_seconds(2.5) == 2.5
    for bad, error, message in (
        (-1, ValueError, "wait_seconds must be a finite number from 0, got -1"),
        (float("nan"), ValueError, "got nan"),
        (float("inf"), ValueError, "got inf"),
        ("1", TypeError, "wait_seconds must be a number, got '1'"),
        (False, TypeError, "got False"),
    ):
        with pytest.raises(error, match=message):
            arguments.wait_seconds(bad)
