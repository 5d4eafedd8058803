"""The value checks every setting, option and argument goes through: each
returns the clean value or raises naming the culprit and the bad value."""

from __future__ import annotations

import math

import pytest
from django.test import override_settings

from astral_taskclaim.core.validation import (
    number_range,
    validate_alias,
    validate_callable,
    validate_count,
    validate_number,
    validate_text,
)


@pytest.mark.parametrize(
    ("low", "high", "low_open", "text"),
    [
        (0, 600, False, "in [0, 600]"),
        (0, 600, True, "in (0, 600]"),
        (0, math.inf, False, "a finite number from 0"),
        (0, math.inf, True, "a finite number above 0"),
    ],
)
def test_a_range_reads_as_an_interval_or_a_lower_bound(
    low: float, high: float, low_open: bool, text: str
) -> None:
    assert number_range(low, high, low_open=low_open) == text


def test_a_number_in_range_comes_back_as_a_float() -> None:
    assert validate_number(0, name="n", high=5) == 0.0
    assert type(validate_number(5, name="n", high=5)) is float
    assert validate_number(1e-9, name="n", low_open=True) == 1e-9


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (True, TypeError, "^wait must be a number, got True$"),
        ("1", TypeError, "^wait must be a number, got '1'$"),
        (None, TypeError, "^wait must be a number, got None$"),
        (-1, ValueError, r"^wait must be in \(0, 10\], got -1$"),
        (0, ValueError, r"^wait must be in \(0, 10\], got 0$"),
        (10.5, ValueError, r"^wait must be in \(0, 10\], got 10.5$"),
        (math.nan, ValueError, "got nan$"),
        (math.inf, ValueError, "got inf$"),
    ],
)
def test_a_bad_number_is_named_with_its_value(value: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        validate_number(value, name="wait", high=10, low_open=True)


def test_a_number_error_can_word_the_range_its_own_way() -> None:
    with pytest.raises(ValueError, match=r"^s must be above 0 and below 1e6, got 0$"):
        validate_number(0, name="s", low_open=True, high=1e6, expected="above 0 and below 1e6")


def test_a_count_takes_a_lower_bound() -> None:
    assert validate_count("n", 0, minimum=0, maximum=20) == 0
    with pytest.raises(ValueError, match=r"^n must be from 0 to 20, got 21$"):
        validate_count("n", 21, minimum=0, maximum=20)
    with pytest.raises(ValueError, match=r"^--concurrency must be from 1 or more, got 0$"):
        validate_count("--concurrency", 0)
    with pytest.raises(TypeError, match=r"^n must be an int, got 2\.0$"):
        validate_count("n", 2.0)


def test_an_alias_must_be_configured_and_the_error_lists_the_aliases() -> None:
    memory = {"BACKEND": "astral_taskclaim.queues.memory.MemoryQueue"}
    with override_settings(TASKCLAIM_QUEUES={"jobs": memory, "mail": memory}):
        assert validate_alias("jobs", name="OPTIONS['queue']") == "jobs"
        with pytest.raises(ValueError) as raised:
            validate_alias("nope", name="OPTIONS['queue']")
    assert str(raised.value) == (
        "OPTIONS['queue'] must name a TASKCLAIM_QUEUES alias (jobs, mail), got 'nope'"
    )


def test_a_hook_must_be_callable_unless_optional_and_left_out() -> None:
    assert validate_callable(print, name="run") is print
    assert validate_callable(None, name="on_failure", required=False) is None
    with pytest.raises(TypeError, match=r"^run must be callable, got str$"):
        validate_callable("print", name="run")
    with pytest.raises(TypeError, match=r"^parse must be callable, got NoneType$"):
        validate_callable(None, name="parse")
    with pytest.raises(TypeError, match=r"^on_failure must be callable, got int$"):
        validate_callable(3, name="on_failure", required=False)


@pytest.mark.parametrize("value", ["", None, 3])
def test_text_must_be_a_non_empty_str(value: object) -> None:
    assert validate_text("jobs", name="queue") == "jobs"
    with pytest.raises(ValueError, match=f"^queue must be a non-empty str, got {value!r}$"):
        validate_text(value, name="queue")
