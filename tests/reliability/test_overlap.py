"""No overlap across processes: a run that outlives its window keeps its key.

Two worker processes share one PostgreSQL queue. Each key's first run lasts
well past its window; while it runs, the test triggers the key again and
again, past the window's end. The worker keeps the claim of the message it
runs (``taskclaim/keep.sql``), so the triggers inside the run are dropped
and no second run of the key starts beside the first, in either process.
"""

from __future__ import annotations

import itertools
import time
from datetime import timedelta

import pytest
from django.db import connection

from astral_taskclaim.claims.claim import enqueue_claimed
from tests.reliability.processes import Fleet
from tests.reliability.support import wait_until
from tests.reliability.workerapp.tasks import RUNS_TABLE

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

KEYS = 3
WINDOW = 1.0
RUN_MS = 2500


def run_starts() -> dict[int, list[object]]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT task_id, at FROM {RUNS_TABLE} ORDER BY at")
        found: dict[int, list[object]] = {}
        for task_id, at in cursor.fetchall():
            found.setdefault(task_id, []).append(at)
    return found


def test_a_run_longer_than_its_window_never_overlaps_its_keys_next_run(fleet: Fleet) -> None:
    queue = fleet.queue()
    tasks = [{"id": n, "mode": "ok", "sleep_ms": RUN_MS} for n in range(1, KEYS + 1)]
    for _ in range(2):
        fleet.start("--concurrency", "4", "--wait", "1")
    for task in tasks:
        assert enqueue_claimed(queue, f"reliability:{task['id']}", task, window_seconds=WINDOW)
    # The first runs recorded (their NOTIFYs may arrive together, so
    # the run table is read rather than the channel).
    wait_until(lambda: len(run_starts()) == KEYS, "the first runs", timeout=60)
    began = time.monotonic()
    accepted = 0
    # Triggers from inside the first runs to past their end: the
    # first window ran out long before the runs do.
    while time.monotonic() - began < 2 * RUN_MS / 1000:
        for task in tasks:
            key = f"reliability:{task['id']}"
            accepted += enqueue_claimed(queue, key, task, window_seconds=WINDOW) is not None
        time.sleep(0.1)  # pacing the triggers, not waiting for an event
    wait_until(lambda: fleet.messages_left() == 0, "the queue to drain", timeout=60)
    assert [worker.stop() for worker in fleet.running()] == [0, 0]
    starts = run_starts()
    run = timedelta(milliseconds=RUN_MS)
    for task in tasks:
        times = starts[task["id"]]
        assert all(later - earlier >= run for earlier, later in itertools.pairwise(times)), times
    # The triggers after the runs ended were taken: the keys were not kept for ever.
    assert accepted >= 1
    assert sum(len(times) for times in starts.values()) == KEYS + accepted
