"""Poison in the healthy load: tasks that call ``sys.exit()``, raise
``KeyboardInterrupt`` or end their worker with ``os._exit()``, tasks that
always fail, bodies that are no claimed task, mixed into healthy tasks on
one PostgreSQL queue consumed by three ``consume_claimed`` processes.

No worker stops but those a task killed, and each killer ends at most
``max_retries + 2`` workers (replaced as a supervisor would): past its
attempts, counted from the first delivery it had alone, it is given up
unrun. Every healthy task runs; every poison message
ends settled with its reason logged; nothing stays in the queue.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter

import pytest

from tests.reliability.processes import Fleet, RunListener, runs
from tests.reliability.support import record_figures, sized, wait_until
from tests.reliability.workerapp.tasks import KILLED_STATUS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

WORKERS = 3
HEALTHY = sized(40, 600)
EACH_POISON = sized(2, 10)
MAX_RETRIES = 1
# One message a batch, as docs/reliability.md advises where tasks may kill
# their worker: a worker killed mid-batch counts a delivery for the batch's
# messages it had not run, which would bring healthy ones to their limit.
WORKER_ARGS = ("--batch-size", "1", "--wait", "1")


def malformed_bodies() -> list[object]:
    token = str(uuid.uuid4())
    return [
        {"not": "an envelope"},
        "text",
        [1, 2, 3],
        {"key": "", "claim": token, "windowSeconds": 60, "task": {}},
        {"key": "k", "claim": "not-a-uuid", "windowSeconds": 60, "task": {}},
    ]


def test_poison_never_stops_the_workers_and_no_healthy_task_is_lost(fleet: Fleet) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    fleet.max_retries = MAX_RETRIES
    modes = ["ok"] * HEALTHY + ["exit", "interrupt", "os_exit", "fail_always"] * EACH_POISON
    rng.shuffle(modes)
    tasks = [{"id": id_, "mode": mode} for id_, mode in enumerate(modes, start=1)]
    fleet.enqueue(tasks)
    queue = fleet.queue()
    bad = malformed_bodies()
    for body in bad:
        queue.send(body)
    queue.send({"key": "null-task", "claim": str(uuid.uuid4()), "windowSeconds": 1, "task": None})

    listener = RunListener()
    try:
        for _ in range(WORKERS):
            fleet.start(*WORKER_ARGS)
        deadline = time.monotonic() + sized(240, 900)
        while fleet.messages_left():
            assert time.monotonic() < deadline, f"messages stuck in the queue (seed {seed})"
            listener.next(timeout=0.5)
            for _ in range(WORKERS - len(fleet.running())):
                fleet.start(*WORKER_ARGS)  # a supervisor restarts a killed worker
    finally:
        listener.close()

    alive = fleet.running()
    # A worker started as the queue ran dry may still be loading Django,
    # its SIGTERM handler not installed yet.
    wait_until(
        lambda: all(any(e["event"] == "worker.started" for e in w.events()) for w in alive),
        "the last workers to start",
    )
    statuses = [worker.stop() for worker in alive]
    assert statuses == [0] * len(statuses), [w.output() for w in fleet.workers]
    exits = Counter(worker.wait() for worker in fleet.workers if worker not in alive)
    found = runs()
    by_mode = {mode: [t["id"] for t in tasks if t["mode"] == mode] for mode in set(modes)}
    lost = [id_ for id_ in by_mode["ok"] if "ok" not in found.get(id_, [])]
    killer_runs = sum(len(found.get(id_, [])) for id_ in by_mode["os_exit"])
    events = fleet.events()
    record_figures(
        "poison",
        healthy=HEALTHY,
        poison=len(tasks) - HEALTHY + len(bad) + 1,
        workers_started=len(fleet.workers),
        workers_killed_by_tasks=exits[KILLED_STATUS],
        killer_runs=killer_runs,
        abandoned=events["queue.task_abandoned"],
        losses=len(lost),
        seed=seed,
    )
    assert lost == [], f"healthy tasks never run (seed {seed})"
    # Only the killers ended workers, each at most max_retries + 1 times.
    assert set(exits) <= {KILLED_STATUS}, [w.output() for w in fleet.workers]
    # One more than its attempts: a kill is counted against the message only
    # once it ran alone (its first unsettled delivery may be a batch-mate's).
    assert exits[KILLED_STATUS] == killer_runs <= (MAX_RETRIES + 2) * EACH_POISON
    # Each poison task ran (a run may repeat when a stalled worker's lease
    # ran out: delivery is at least once) and ended settled with its reason.
    assert all(found.get(t["id"]) for t in tasks if t["mode"] != "ok"), seed
    assert all(len(found[id_]) <= MAX_RETRIES + 2 for id_ in by_mode["os_exit"]), seed
    assert events["queue.task_abandoned"] >= EACH_POISON
    assert events["queue.task_failed"] + events["queue.task_abandoned"] >= 4 * EACH_POISON
    assert events["queue.message_malformed"] == len(bad)
    assert events["queue.task_unparseable"] == 1
    assert fleet.messages_left() == 0


@pytest.mark.parametrize(("concurrency", "max_retries"), [(1, 0), (1, 1), (4, 0)])
def test_a_killer_in_a_batch_uses_up_its_own_attempts_not_its_batch_mates(
    fleet: Fleet, concurrency: int, max_retries: int
) -> None:
    # Batches of 12: each kill counted a delivery for every
    # message of the batch, so its healthy batch-mates were given up unrun
    # after max_retries + 1 kills. A message whose last delivery ran out
    # unsettled now runs alone, the rest of its batch handed back first.
    fleet.max_retries = max_retries
    tasks = [{"id": id_, "mode": "os_exit" if id_ == 4 else "ok"} for id_ in range(1, 13)]
    fleet.enqueue(tasks)
    deadline = time.monotonic() + 120
    while fleet.messages_left():
        assert time.monotonic() < deadline, "messages stuck in the queue"
        if not fleet.running():
            fleet.start("--batch-size", "12", "--wait", "1", "--concurrency", str(concurrency))
        time.sleep(0.2)  # a supervisor's restart delay, not a wait for an event
    for worker in fleet.running():
        worker.stop()
    found = runs()
    events = fleet.events()
    assert [id_ for id_ in range(1, 13) if id_ != 4 and "ok" not in found.get(id_, [])] == []
    assert events["queue.task_abandoned"] == 1
    # The killer ended workers until it had run alone max_retries + 1 times.
    assert len(found.get(4, [])) == max_retries + 2
