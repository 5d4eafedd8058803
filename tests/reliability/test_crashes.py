"""Workers killed with SIGKILL at random points of their batches, again and
again: every enqueued task still runs, no message stays leased, and every
claim ends as the TypeScript package says (kept by a task that succeeded, released by one
that gave up).

Three ``consume_claimed`` processes share one PostgreSQL queue. Each run of
the task commits a row in ``reliability_run`` and a NOTIFY carrying the
worker's pid; after a random number of runs the test waits a random few
milliseconds and SIGKILLs the worker that ran last (running one message at
a time, or four side by side), so the kills land
anywhere: inside a run, between a run and its claim write, between the
claim write and the batch's settlement, inside the settlement. A fresh
worker replaces each one killed. Delivery is at least once, so a task may
run twice (a duplicate); it must never run zero times (a loss).
"""

from __future__ import annotations

import random
import time

import pytest
from django.db import connection

from tests.reliability.processes import Fleet, RunListener, runs
from tests.reliability.support import record_figures, sized
from tests.reliability.workerapp.tasks import MODES

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

WORKERS = 3
KILLS = sized(6, 50)
TASKS = sized(60, 750)


def make_tasks(rng: random.Random) -> list[dict[str, object]]:
    """Mostly tasks that succeed; some fail once, some always fail."""
    weights = {"ok": 7, "fail_first": 2, "fail_always": 1}
    modes = rng.choices(MODES, weights=[weights[mode] for mode in MODES], k=TASKS)
    return [
        {"id": id_, "mode": mode, "sleep_ms": rng.randrange(0, 25)}
        for id_, mode in enumerate(modes, start=1)
    ]


@pytest.mark.parametrize(
    ("worker_args", "asynchronous"),
    [
        (("--batch-size", "4"), False),
        (("--concurrency", "4", "--batch-size", "8"), False),
        (("--concurrency", "4", "--batch-size", "8"), True),
    ],
    ids=["one at a time", "4 side by side", "4 async side by side"],
)
def test_sigkilled_workers_lose_nothing_and_leave_claims_as_the_typescript_package_says(
    fleet: Fleet, worker_args: tuple[str, ...], asynchronous: bool
) -> None:
    fleet.asynchronous = asynchronous
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    tasks = make_tasks(rng)
    tokens = fleet.enqueue(tasks)
    listener = RunListener()
    try:
        for _ in range(WORKERS):
            fleet.start(*worker_args, "--wait", "1")
        kills = 0
        deadline = time.monotonic() + 300
        while kills < KILLS and fleet.messages_left():
            assert time.monotonic() < deadline, f"the workers stopped running tasks (seed {seed})"
            pid = None
            for _ in range(rng.randint(1, 5)):
                pid = listener.next(timeout=60)
                if pid is None:
                    break
            if pid is None:
                continue  # the queue ran dry between checks
            time.sleep(rng.uniform(0, 0.04))  # a random point after that run, not a wait
            victim = next((w for w in fleet.running() if w.pid == pid), None)
            if victim is None:
                continue
            victim.kill()
            kills += 1
            fleet.start(*worker_args, "--wait", "1")
        # Killed workers' leases run out (visibility_timeout) and the
        # survivors take those messages; wait for the queue to drain.
        deadline = time.monotonic() + 120
        while fleet.messages_left():
            assert time.monotonic() < deadline, f"messages stuck in the queue (seed {seed})"
            listener.next(timeout=0.5)
    finally:
        listener.close()

    statuses = [worker.stop() for worker in fleet.running()]
    assert statuses == [0] * len(statuses), [w.output() for w in fleet.workers]

    found = runs()
    lost = [task["id"] for task in tasks if task["id"] not in found]
    total_runs = sum(len(outcomes) for outcomes in found.values())
    duplicates = sum(max(0, outcomes.count("ok") - 1) for outcomes in found.values())
    record_figures(
        "crashes"
        if worker_args[0] == "--batch-size"
        else "crashes_async_side_by_side"
        if asynchronous
        else "crashes_side_by_side",
        tasks=len(tasks),
        workers_started=len(fleet.workers),
        kills=kills,
        runs=total_runs,
        duplicates=duplicates,
        losses=len(lost),
        seed=seed,
    )
    assert lost == [], f"tasks never run (seed {seed})"
    assert kills >= min(KILLS, 1)
    assert fleet.messages_left() == 0  # nothing left leased (or queued) forever

    # A task that succeeded keeps its claim, under the token it was enqueued
    # with, to the end of its window; one that gave up released it.
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT key, token::text FROM taskclaim.claim
               WHERE key LIKE 'reliability:%%' AND expires_at > clock_timestamp()"""
        )
        held = dict(cursor.fetchall())
    expected = {
        f"reliability:{id_}": tokens[id_] for id_, outcomes in found.items() if "ok" in outcomes
    }
    assert held == expected, f"seed {seed}"
    gave_up = [int(str(task["id"])) for task in tasks if task["mode"] == "fail_always"]
    assert all(found[id_].count("fail") >= 1 for id_ in gave_up)
