"""Per-group concurrency limits across processes: at most N runs at once.

The worker processes run a task declared with ``concurrency_limit=2`` (its
group: the task itself) that records when each run starts and ends. Three
workers at ``--concurrency 4`` could run twelve at once; the slots let two.
Messages over the limit wait and run later: none is lost. A SIGKILLed
worker's slots free when they end, unkept, and the group runs on.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import datetime

import pytest
from django.db import connection

from tests.reliability.processes import Fleet
from tests.reliability.support import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TASKS = 30
LIMIT = 2


@pytest.fixture
def limited_runs() -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute(
            """CREATE TABLE IF NOT EXISTS limited_run (
                 id bigserial PRIMARY KEY, task_id int NOT NULL, pid int NOT NULL,
                 started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
                 finished_at timestamptz);
               TRUNCATE limited_run"""
        )
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE limited_run")


def recorded() -> list[tuple[int, int, datetime, datetime | None]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT task_id, pid, started_at, finished_at FROM limited_run ORDER BY id")
        return list(cursor.fetchall())


def most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    """The most spans (start, end) open at one moment."""
    # At equal times an end comes before a start: a slot freed, then taken.
    edges = sorted(itertools.chain(((a, 1) for a, _ in spans), ((b, -1) for _, b in spans)))
    return max(itertools.accumulate(step for _, step in edges))


def finished() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM limited_run WHERE finished_at IS NOT NULL")
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def test_three_workers_run_at_most_two_of_the_group_at_once_and_lose_none(
    fleet: Fleet, limited_runs: None
) -> None:
    fleet.limited = True
    for _ in range(3):
        fleet.start("--concurrency", "4", "--wait", "1")
    fleet.enqueue([{"id": n, "sleep_ms": 200} for n in range(TASKS)])
    wait_until(lambda: fleet.messages_left() == 0, "the queue to drain", timeout=120)
    assert [worker.stop() for worker in fleet.running()] == [0, 0, 0]
    runs = recorded()
    assert sorted(task for task, *_ in runs) == list(range(TASKS))  # each ran once
    spans = [(start, end) for *_, start, end in runs if end is not None]
    assert len(spans) == TASKS
    assert most_at_once(spans) == LIMIT
    assert fleet.events()["queue.concurrency_limited"] >= 1


def test_a_killed_workers_slots_free_when_they_end_before_its_messages_come_back(
    fleet: Fleet, limited_runs: None
) -> None:
    fleet.limited = True
    # The dead worker's messages come back after 20 s; its slots end 3 s unkept.
    fleet.visibility_timeout = 20
    first = fleet.start("--concurrency", "4", "--wait", "1")
    long_runs = [{"id": n, "sleep_ms": 60_000, "sleep_first": True} for n in (1, 2)]
    fleet.enqueue(long_runs, window_seconds=3)
    wait_until(lambda: len(recorded()) == 2, "both long runs to start", timeout=60)
    assert {pid for _, pid, *_ in recorded()} == {first.pid}
    first.kill()
    # A new message of the group: both slots are held by the dead runs.
    fleet.enqueue([{"id": 3}], window_seconds=3)
    second = fleet.start("--concurrency", "4", "--wait", "1")
    wait_until(lambda: finished() == 3, "every task to run to its end", timeout=90)
    assert second.stop() == 0
    runs = recorded()
    order = [task for task, *_ in runs]
    assert sorted(order) == [1, 1, 2, 2, 3]
    # Task 3 ran once the dead slots ended, before the dead runs came back.
    assert order[2] == 3
    assert [pid for task, pid, _, end in runs if end is not None] == [second.pid] * 3
