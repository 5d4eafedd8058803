"""Values Django's validation lets through to ``enqueue()``: a ``run_after``
at the ends of time, a ``bool`` priority, NaN and infinity in the arguments.
Each is either stored and read back, or refused before anything is written."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection

from astral_taskclaim.tasks_backend.compat import (
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultStatus,
)
from tests.aiokit import run

from . import jobs
from .running import claims, drain, message_rows

NAN, INF = float("nan"), float("inf")


def stored_rows() -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT priority, run_after FROM taskclaim.task_result")
        return cursor.fetchall()


def nothing_written() -> bool:
    return message_rows() == [] and stored_rows() == [] and claims() == []


@pytest.mark.parametrize(
    "run_after",
    [
        datetime(9999, 12, 31, 23, 59, tzinfo=UTC),
        datetime(9999, 1, 1, tzinfo=UTC),
        datetime(9998, 12, 31, 20, tzinfo=timezone(timedelta(hours=-5))),  # 9999 in UTC
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(2, 1, 1, 3, tzinfo=timezone(timedelta(hours=5))),  # year 1 in UTC
    ],
)
def test_a_run_after_that_could_not_be_read_back_is_refused(run_after: datetime) -> None:
    with pytest.raises(InvalidTask) as raised:
        jobs.add.using(run_after=run_after)
    message = str(raised.value)
    assert jobs.add.module_path in message
    assert run_after.isoformat() in message
    assert "from 0002-01-01T00:00:00+00:00 to before 9999-01-01T00:00:00+00:00" in message
    assert nothing_written()


@pytest.mark.parametrize(
    "run_after",
    [
        datetime(9998, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(9998, 12, 31, 18, 59, tzinfo=timezone(timedelta(hours=-5))),
        datetime(2, 1, 1, tzinfo=UTC),
    ],
)
def test_a_run_after_at_either_end_of_the_range_is_read_back(run_after: datetime) -> None:
    result = jobs.add.using(run_after=run_after).enqueue(1, 2)
    assert jobs.add.get_result(result.id).task.run_after == run_after
    assert run(jobs.add.aget_result(result.id)).task.run_after == run_after
    result.refresh()
    assert result.task.run_after == run_after


def test_the_reading_side_refuses_what_enqueue_refuses() -> None:
    result = jobs.add.enqueue(1, 2)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE taskclaim.task_result SET run_after = '9999-01-01 00:00:00+00' "
            "WHERE id = %s::uuid",
            [result.id],
        )
    same_range = re.escape("run_after is not from 0002-01-01T00:00:00+00:00 to before 9999-01-01")
    with pytest.raises(TaskResultDoesNotExist, match=same_range):
        jobs.add.get_result(result.id)
    with pytest.raises(TaskResultDoesNotExist, match=same_range):
        run(jobs.add.aget_result(result.id))


@pytest.mark.parametrize(("priority", "stored"), [(True, 1), (False, 0), (3.0, 3)])
def test_a_priority_django_accepts_is_stored_as_the_whole_number(
    priority: Any, stored: int
) -> None:
    # Django's validate_task takes any whole number in range (bool is an
    # int), and its own backends keep it as given: stored as that number.
    result = jobs.record.using(priority=priority).enqueue("x")
    later = run(jobs.record.using(priority=priority).aenqueue("y"))
    assert [row[1] for row in message_rows()] == [stored, stored]
    assert [row[0] for row in stored_rows()] == [stored, stored]
    for each in (result, later):
        read = jobs.record.get_result(each.id).task.priority
        assert read == stored
        assert type(read) is int


ARGUMENTS = [
    ((NAN,), {}, "args[0] is nan"),
    ((1,), {"b": INF}, "kwargs['b'] is inf"),
    (([1, {"x": -INF}],), {}, "args[0][1]['x'] is -inf"),
    (({NAN: 1},), {}, "args[0] has the key nan"),
]


@pytest.mark.parametrize(("args", "kwargs", "culprit"), ARGUMENTS)
def test_nan_or_infinity_in_the_arguments_is_a_type_error_naming_it(
    args: tuple[Any, ...], kwargs: dict[str, Any], culprit: str
) -> None:
    expected = f"{jobs.add.module_path}: arguments must be JSON: {culprit}"
    with pytest.raises(TypeError) as raised:
        jobs.add.enqueue(*args, **kwargs)
    assert str(raised.value).startswith(expected)
    assert "JSON has no NaN or infinity" in str(raised.value)
    with pytest.raises(TypeError) as raised:
        run(jobs.add.aenqueue(*args, **kwargs))
    assert str(raised.value).startswith(expected)
    with pytest.raises(TypeError, match=r"refresh: arguments must be JSON: args\[0\] is nan"):
        jobs.refresh.enqueue(NAN)  # coalescing: not even its key is claimed
    assert nothing_written()


@pytest.mark.parametrize(
    ("args", "kwargs", "culprit"),
    [
        ((1,), {"b": object()}, "kwargs['b']: Unsupported type"),
        (({"when": datetime(2030, 1, 1, tzinfo=UTC)},), {}, "args[0]['when']: Unsupported type"),
        ((1,), {"b": {"items": [1, 2, {3}]}}, "kwargs['b']['items'][2]: Unsupported type"),
        (
            ({(1, 2): 3},),
            {},
            "args[0] has the key (1, 2) (tuple); JSON object keys must be str, int, float",
        ),
    ],
)
def test_an_argument_of_no_json_type_is_named_with_its_path(
    args: tuple[Any, ...], kwargs: dict[str, Any], culprit: str
) -> None:
    with pytest.raises(TypeError) as raised:
        jobs.add.enqueue(*args, **kwargs)
    assert str(raised.value).startswith(
        f"{jobs.add.module_path}: arguments must be JSON: {culprit}"
    )
    assert nothing_written()


def test_a_decimal_argument_is_refused_naming_it_and_what_to_send() -> None:
    with pytest.raises(TypeError) as raised:
        jobs.add.enqueue(1, b={"price": [Decimal("1.10")]})
    assert str(raised.value) == (
        f"{jobs.add.module_path}: arguments must be JSON: kwargs['b']['price'][0] is "
        "Decimal('1.10'): JSON has no decimal type, and a float would lose digits (the "
        "TypeScript side reads a double); send str() of it"
    )
    assert nothing_written()


def test_nan_is_refused_before_a_remote_queue_is_claimed_or_sent_to(
    memory_backend: Any,
) -> None:
    with pytest.raises(TypeError, match=r"arguments must be JSON: args\[0\] is nan"):
        jobs.refresh.enqueue(NAN)
    assert memory_backend.entries == {}
    assert nothing_written()


def test_a_nan_return_value_fails_the_attempt_and_the_worker_goes_on() -> None:
    nan = jobs.returns_nan.using(max_retries=0).enqueue()
    after = jobs.add.enqueue(1, 2)
    stats = drain()
    assert stats.received == 2
    stored = jobs.returns_nan.get_result(nan.id)
    assert stored.status == TaskResultStatus.FAILED
    assert stored.errors[0].exception_class is TypeError
    assert "return value['ratio'] is nan" in stored.errors[0].traceback
    assert jobs.add.get_result(after.id).return_value == 3
