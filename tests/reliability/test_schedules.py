"""Periodic slots enqueued by worker processes that are killed, replaced
and cut off by a server restart: every slot exactly once, no leader.

Five ``consume_claimed`` processes take part in a one-second schedule whose
key names its slot; its messages go to a queue nobody consumes, so each
slot's messages are counted where they land. Two workers are SIGKILLed and
replaced, the server restarts, one more is killed; then every second from
the first slot to the last has one message: 0 missing, 0 doubled. The CI
size covers 15 slots, ``make stress`` 100.
"""

from __future__ import annotations

import json
import signal
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from tests.reliability.processes import Fleet
from tests.reliability.support import record_figures, sized, wait_until
from tests.workerkit import WorkerProcess, restart_server_or_terminate

pytestmark = pytest.mark.django_db(transaction=True)

SCHEDULE = "reliability-periodic"
POSTGRES = "astral_taskclaim.queues.postgres.PostgresQueue"


def start(fleet: Fleet) -> WorkerProcess:
    periodic = f"{fleet.queue_name}-periodic"
    queues = {
        "reliability": {"BACKEND": POSTGRES, "OPTIONS": fleet.options()},
        "periodic": {"BACKEND": POSTGRES, "OPTIONS": {"queue_name": periodic}},
    }
    schedules = {
        SCHEDULE: {
            "task": "tests.reliability.workerapp.tasks.periodic_task",
            "every": 1,
            "key": "slot:{slot}",
            "payload": {},
        }
    }
    env = {
        "TASKCLAIM_RELIABILITY_QUEUES": json.dumps(queues),
        "TASKCLAIM_RELIABILITY_SCHEDULES": json.dumps(schedules),
    }
    return fleet.group.start(
        "reliability", "--wait", "0.5", env=env, events_variable="TASKCLAIM_RELIABILITY_EVENTS"
    )


def slots(fleet: Fleet) -> Counter[datetime]:
    """How many messages each slot enqueued."""
    connection.close_if_unusable_or_obsolete()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT body::json->>'key' FROM taskclaim.message WHERE queue = %s",
            [f"{fleet.queue_name}-periodic"],
        )
        keys = [row[0] for row in cursor.fetchall()]
    return Counter(
        datetime.strptime(key, "slot:%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) for key in keys
    )


@pytest.mark.slow
def test_every_slot_is_enqueued_once_through_kills_and_a_server_restart(fleet: Fleet) -> None:
    total = sized(15, 100)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.schedule WHERE name = %s", [SCHEDULE])
    workers = [start(fleet) for _ in range(5)]
    wait_until(lambda: slots(fleet), "the first slot", timeout=120)
    first = min(slots(fleet))
    last = first + timedelta(seconds=total - 1)

    def reached(fraction: float) -> None:
        moment = first + timedelta(seconds=int(total * fraction))
        wait_until(lambda: max(slots(fleet)) >= moment, f"slot {moment}", timeout=120)

    reached(0.25)
    for worker in workers[:2]:
        worker.kill()  # SIGKILL, wherever it is: maybe inside a slot's transaction
    workers += [start(fleet) for _ in range(2)]
    reached(0.5)
    how, _ = restart_server_or_terminate(fleet.application_name)
    reached(0.75)
    workers[2].kill()
    workers.append(start(fleet))
    reached(1.0)
    for worker in workers:
        if worker.running:
            assert worker.stop(signal.SIGTERM) == 0, worker.output()
    found = slots(fleet)
    expected = [first + timedelta(seconds=n) for n in range(total)]
    missing = [slot for slot in expected if slot not in found]
    doubled = {slot: count for slot, count in found.items() if count > 1}
    assert (missing, doubled) == ([], {})
    assert max(found) >= last
    events = fleet.events()
    assert events["schedule.slot_enqueued"] == sum(found.values())
    record_figures(
        "schedules",
        how=how,
        workers=len(workers),
        slots=len(expected),
        missing=len(missing),
        doubled=len(doubled),
        kills=3,
        late_slots=sum(1 for e in _late(fleet) if e > 1.0),
    )


def _late(fleet: Fleet) -> list[float]:
    """How late each slot was enqueued, in seconds, from the workers' logs."""
    return [
        float(entry.get("late_seconds", 0))
        for worker in fleet.workers
        for entry in worker.events()
        if entry["event"] == "schedule.slot_enqueued"
    ]
