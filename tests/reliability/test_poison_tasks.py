"""Django Task poison in a healthy load: odd, forged and unknown-task
messages, tasks that exit or interrupt, and runs whose earlier deliveries
killed their workers, shuffled into healthy runs on the PostgreSQL queue and
drained by one worker. It never stops; every healthy run succeeds; every
poison message ends settled with its reason, and its run (if it has one) as
it should be."""

from __future__ import annotations

import random
import signal
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from astral_taskclaim.queues import queues
from tests.reliability.support import EventLog, record_figures, sized
from tests.tasks_backend import jobs
from tests.tasks_backend.running import drain, make_due, message_rows

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

HEALTHY = sized(40, 1000)
EACH_POISON = sized(1, 20)
BROKEN_MODULE = "tests.tasks_backend.import_raises"


def _empty() -> None:
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = 'default'")
        cursor.execute("DELETE FROM taskclaim.task_result")
        cursor.execute("DELETE FROM taskclaim.claim")


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    """Empty tables, fast retries and SIGINT handled as a worker's handlers do."""
    _empty()
    jobs.calls.clear()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        with override_settings(TASKCLAIM_DELAY_SCALE=0.001):
            yield
    finally:
        signal.signal(signal.SIGINT, previous)
        jobs.calls.clear()
        _empty()


def odd_bodies(template: dict[str, Any]) -> list[dict[str, Any]]:
    """Bodies that must each be refused as malformed: one of every kind."""

    def forged(task: dict[str, Any]) -> dict[str, Any]:
        token = str(uuid.uuid4())
        return {"key": f"forged:{token}", "claim": token, "windowSeconds": 1, "task": task}

    task = template["task"]
    return [
        *(
            {**template, "task": {**task, "runAfter": value}}
            for value in ("2030-01-01T00:00:00", "2024-02-30T00:00:00Z", "2024-01-01T25:00:00Z")
        ),
        {**template, "task": {**task, "taskPath": jobs.record.module_path}},
        {**template, "task": {**task, "args": ["forged"]}},
        *(
            forged({"taskPath": path, "args": [], "kwargs": {}})
            for path in (".x", "...", f"{BROKEN_MODULE}.task")
        ),
    ]


def test_django_task_poison_never_stops_the_worker(event_log: EventLog) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    healthy = [jobs.add.enqueue(n, 1) for n in range(HEALTHY)]
    exiting = [jobs.exits.using(max_retries=1).enqueue(3) for _ in range(EACH_POISON)]
    interrupted = [jobs.interrupts.using(max_retries=0).enqueue() for _ in range(EACH_POISON)]
    killed = [jobs.add.using(max_retries=1).enqueue(-1, -1) for _ in range(EACH_POISON)]
    with connection.cursor() as cursor:  # two deliveries whose workers died
        ids = [result.id for result in killed]
        cursor.execute(
            "UPDATE taskclaim.message SET attempts = 2 WHERE (body::jsonb->>'claim') = ANY(%s)",
            [ids],
        )
    template = next(row[0] for row in message_rows() if row[0]["claim"] == healthy[0].id)
    odd = [body for _ in range(EACH_POISON) for body in odd_bodies(template)]
    rng.shuffle(odd)
    for body in odd:
        queues["default"].send(body)

    totals: Counter[str] = Counter()
    while message_rows():
        stats = drain(batch_size=rng.randint(1, 10))
        totals.update(ok=stats.ok, malformed=stats.malformed, failed=stats.failed)
        make_due()  # the retries of the exiting tasks

    for results, status in ((healthy, "SUCCESSFUL"), (exiting + interrupted + killed, "FAILED")):
        for result in results:
            result.refresh()
            assert result.status == status, (result.id, seed)
    assert all(result.return_value == n + 1 for n, result in enumerate(healthy))
    assert ("add", -1, -1) not in jobs.calls  # the killed runs are not run again
    assert BROKEN_MODULE not in sys.modules
    events = Counter(getattr(record, "event", None) for record in event_log.records)
    assert events["queue.message_malformed"] == len(odd)
    assert events["queue.task_abandoned"] == len(killed)
    record_figures(
        "poison_django_tasks",
        healthy=len(healthy),
        poison=len(odd) + len(exiting) + len(interrupted) + len(killed),
        malformed=totals["malformed"],
        failed=totals["failed"],
        abandoned=events["queue.task_abandoned"],
        losses=sum(result.status != "SUCCESSFUL" for result in healthy),
        seed=seed,
    )
