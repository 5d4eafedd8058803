"""retry_delay_seconds: the TypeScript package's schedule, exactly."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from astral_taskclaim import retry_delay_seconds
from astral_taskclaim.consumer.retry import _MAX_RETRY_DELAY_SECONDS, requested_wait_ms


@pytest.mark.parametrize(
    ("attempts", "delay"),
    [
        (1, 30),
        (2, 60),
        (3, 120),
        (4, 240),
        (10, 15_360),
        (11, 30_720),
        (12, 43_200),
        (10**9, 43_200),
    ],
)
def test_backoff_doubles_from_30_seconds_up_to_12_hours(attempts: int, delay: int) -> None:
    assert retry_delay_seconds(attempts) == delay


@pytest.mark.parametrize(
    ("retry_after_ms", "delay"),
    [
        (0, 30),
        (29_999, 30),
        (45_000, 45),
        (45_001, 46),
        (45_000.5, 46),
        (43_200_000, 43_200),
        (43_200_001, 43_200),
        (10**400, 43_200),
        (1.7e308, 43_200),
    ],
)
def test_a_longer_retry_after_wins_rounded_up_and_capped(retry_after_ms: float, delay: int) -> None:
    assert retry_delay_seconds(1, retry_after_ms) == delay


@pytest.mark.parametrize(
    "retry_after_ms", [None, math.nan, math.inf, -math.inf, -1, -0.5, True, False, "60000", [1]]
)
def test_anything_but_a_finite_number_from_zero_counts_as_none(retry_after_ms: object) -> None:
    assert retry_delay_seconds(3, retry_after_ms) == 120


@pytest.mark.parametrize(("attempts", "error"), [(0, ValueError), (-1, ValueError),
                                                 (True, TypeError), (1.0, TypeError)])  # fmt: skip
def test_attempts_must_be_a_count_from_one(attempts: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="attempts"):
        retry_delay_seconds(attempts)  # type: ignore[arg-type]


@given(
    attempts=st.integers(min_value=1, max_value=10_000),
    retry_after_ms=st.one_of(
        st.none(),
        st.integers(min_value=0, max_value=10**15),
        st.floats(min_value=0, max_value=1e12, allow_nan=False),
    ),
)
def test_the_schedule_matches_exact_arithmetic(attempts: int, retry_after_ms: float | None) -> None:
    backoff = 30 * 2 ** (attempts - 1)
    wait = 0 if retry_after_ms is None else math.ceil(Fraction(retry_after_ms) / 1000)
    expected = min(max(backoff, wait), _MAX_RETRY_DELAY_SECONDS)
    assert retry_delay_seconds(attempts, retry_after_ms) == expected


def test_the_requested_wait_comes_from_the_error_or_is_none() -> None:
    error = LookupError("slow down")
    assert requested_wait_ms(lambda e: 5_000 if e is error else 0, error) == 5_000
    assert requested_wait_ms(None, error) is None

    def broken(error: BaseException) -> float:
        raise RuntimeError("no header")

    assert requested_wait_ms(broken, error) is None
