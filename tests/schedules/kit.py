"""What the schedule tests share: a PostgreSQL queue of their own, a
claimed task on it, a clock they move, and reading what the slots did."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from astral_taskclaim.tasks import ClaimedTask

POSTGRES = "astral_taskclaim.queues.postgres.PostgresQueue"
#: A moment whose second is 0 (interval slots of 1 s fall on it).
START = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC)


@dataclass
class Clock:
    """A clock a test moves by hand."""

    now: datetime = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def truncate() -> None:
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE taskclaim.claim, taskclaim.schedule")


@pytest.fixture
def sched_queue() -> Iterator[str]:
    """Queue alias ``sched``: a PostgreSQL queue with a name of its own;
    the claim and schedule tables empty before and after."""
    name = f"sched-{uuid.uuid4().hex[:12]}"
    queues = {
        "default": {"BACKEND": POSTGRES},
        "sched": {"BACKEND": POSTGRES, "OPTIONS": {"queue_name": name}},
    }
    truncate()
    with override_settings(TASKCLAIM_QUEUES=queues):
        yield name
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [name])
    truncate()


def claimed(window_seconds: float = 0.5) -> ClaimedTask[Any]:
    """A claimed task on ``sched``, not registered (a queue has one task)."""
    return ClaimedTask(
        lambda task: None,
        queue="sched",
        max_retries=0,
        parse=None,
        retry_after_ms=None,
        name="tests.schedules.report",
        window_seconds=window_seconds,
    )


def message_keys(queue_name: str) -> list[str]:
    """The keys of the messages on ``queue_name``, in enqueue order."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT body::json->>'key' FROM taskclaim.message WHERE queue = %s ORDER BY id",
            [queue_name],
        )
        return [row[0] for row in cursor.fetchall()]


def record(name: str) -> tuple[datetime, str, int] | None:
    """``taskclaim.schedule``'s row of ``name``: last slot, outcome, slots."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT last_slot, outcome, slots FROM taskclaim.schedule WHERE name = %s", [name]
        )
        row = cursor.fetchone()
    return None if row is None else (row[0], row[1], row[2])


#: The refusal of a cron expression whose minute field is 61.
MINUTE_61 = (
    "its minute field is '61' (minute: 0-59). A cron expression is five fields, minute "
    "hour day-of-month month day-of-week, with an optional sixth for seconds at the end "
    "(croniter's order, not Quartz's seconds-first; a seventh after it is the year)"
)
