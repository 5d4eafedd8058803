"""Slots enqueued inside PostgreSQL: ``taskclaim.enqueue_schedule_slot()``
once per slot and byte for byte the worker path's message, and the pg_cron
jobs scheduled after ``migrate`` (where pg_cron is loaded)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection, connections
from django.urls import reverse

from astral_taskclaim.apps import after_migrate
from astral_taskclaim.db.connections import separate_connection
from astral_taskclaim.queues import queues
from astral_taskclaim.schedules import Scheduler, cron, every, schedules
from astral_taskclaim.schedules import in_database as inside
from astral_taskclaim.schedules.overview import overview
from astral_taskclaim.schedules.schedule import Schedule
from astral_taskclaim.schedules.timing import slot_text
from astral_taskclaim.tasks import ClaimedTask, TaskRegistry
from tests.admin.data import client_for, staff
from tests.schedules.kit import START, Clock, claimed, message_keys, record, sched_queue

__all__ = ["sched_queue"]

pytestmark = pytest.mark.django_db(transaction=True)


def in_db(task: ClaimedTask[Any], key: str = "report:{slot}", name: str = "in-db") -> Schedule:
    return Schedule(name, every(60), task, key, task={"n": 1, "é": "{slot}"}, in_database=True)


def enqueue_slot(schedule: Schedule, slot: datetime, *, using: str = "default") -> str | None:
    """One call of the function the schedule's job runs, for ``slot``."""
    arguments = {**inside._slot_arguments(schedule), "slot": slot}
    named = ", ".join(f"{name} => %({name})s" for name in arguments)
    with connections[using].cursor() as cursor:
        cursor.execute(f"SELECT taskclaim.enqueue_schedule_slot({named})", arguments)
        return cursor.fetchone()[0]


def bodies(queue_name: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT body FROM taskclaim.message WHERE queue = %s ORDER BY id", [queue_name]
        )
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.parametrize(
    ("timing", "expression"),
    [
        (every(60), "* * * * *"),
        (every(300), "*/5 * * * *"),
        (every(3600), "0 * * * *"),
        (every(7200), "0 */2 * * *"),
        (every(86400), "0 0 * * *"),
        (cron("15  3 * * 1-5"), "15 3 * * 1-5"),
        (cron("*/10 0-6 1,15 * *", zone="Etc/UTC"), "*/10 0-6 1,15 * *"),
    ],
)
def test_timings_pg_cron_runs_on_the_same_slots(timing: Any, expression: str) -> None:
    assert inside._pg_cron_expression(timing) == expression


@pytest.mark.parametrize(
    ("timing", "why"),
    [
        (every(1), "every(1)"),
        (every(90), "every(90)"),
        (every(172800), "every(172800)"),
        (cron("0 * * * *", zone="Europe/Berlin"), "in UTC, not Europe/Berlin"),
        (cron("@hourly"), "five fields"),
        (cron("0 0 * * MON"), "five fields"),
        (cron("0 0 * * * 30"), "five fields"),
        (cron("0 0 L * *"), "five fields"),
        (cron("0 0 1 * 1"), "both the day of month and the day of week"),
    ],
)
def test_timings_pg_cron_cannot_run_exactly_are_refused(timing: Any, why: str) -> None:
    with pytest.raises(ValueError, match=why.replace("(", r"\(").replace(")", r"\)")):
        inside._pg_cron_expression(timing)


def test_a_slot_is_enqueued_once_however_often_it_is_called(sched_queue: str) -> None:
    schedule = in_db(claimed(window_seconds=300))
    assert enqueue_slot(schedule, START) == "enqueued"
    assert enqueue_slot(schedule, START) is None
    assert message_keys(sched_queue) == ["report:2026-12-01T09:00:00Z"]
    assert record("in-db") == (START, "enqueued", 1)
    assert enqueue_slot(schedule, START + timedelta(minutes=1)) == "enqueued"
    assert record("in-db") == (START + timedelta(minutes=1), "enqueued", 2)


def test_a_slot_the_record_holds_is_not_enqueued_again_after_its_claim_expired(
    sched_queue: str,
) -> None:
    # A worker whose clock runs ahead enqueued the slot and recorded it;
    # by the time pg_cron reaches that slot, its claim has long expired.
    schedule = in_db(claimed(window_seconds=300))
    assert enqueue_slot(schedule, START) == "enqueued"
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.claim")
    assert enqueue_slot(schedule, START) is None
    assert enqueue_slot(schedule, START - timedelta(minutes=1)) is None
    assert message_keys(sched_queue) == ["report:2026-12-01T09:00:00Z"]
    assert record("in-db") == (START, "enqueued", 1)


def test_two_connections_racing_for_a_slot_enqueue_it_once(sched_queue: str) -> None:
    schedule = in_db(claimed(window_seconds=300))
    barrier, outcomes = threading.Barrier(2), []

    def call() -> None:
        barrier.wait()
        try:
            outcomes.append(enqueue_slot(schedule, START))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=call) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes, key=str) == [None, "enqueued"]
    assert len(message_keys(sched_queue)) == 1


def test_a_slot_whose_task_key_an_event_holds_coalesces(sched_queue: str) -> None:
    task = claimed(window_seconds=300)
    assert task.enqueue("report", {"by": "event"}) is not None
    assert enqueue_slot(in_db(task, key="report"), START) == "coalesced"
    assert message_keys(sched_queue) == ["report"]  # the event's message, run once
    assert record("in-db") == (START, "coalesced", 1)


def test_a_worker_ticking_the_schedule_does_not_double_the_slot(sched_queue: str) -> None:
    schedule = in_db(claimed(window_seconds=300))
    assert enqueue_slot(schedule, START) == "enqueued"
    assert Scheduler(include=[schedule], clock=Clock()).tick() == 0
    assert len(message_keys(sched_queue)) == 1


def _same_bytes(worker: str, database: str, slots: tuple[datetime, datetime]) -> None:
    """The two bodies are equal but for their slot and claim token."""
    for body, slot in zip((worker, database), slots, strict=True):
        assert slot_text(slot) in body
    tokens = [json.loads(body)["claim"] for body in (worker, database)]
    assert (
        database.replace(tokens[1], tokens[0]).replace(slot_text(slots[1]), slot_text(slots[0]))
        == worker
    )


def test_the_body_is_the_one_the_worker_path_writes(sched_queue: str) -> None:
    schedule = in_db(claimed(window_seconds=300))
    assert Scheduler(include=[schedule], clock=Clock()).tick() == 1  # slot START
    assert enqueue_slot(schedule, START + timedelta(minutes=1)) == "enqueued"
    worker, database = bodies(sched_queue)
    assert "taskName" not in database
    _same_bytes(worker, database, (START, START + timedelta(minutes=1)))


def test_on_a_queue_of_several_tasks_the_body_names_its_task(sched_queue: str) -> None:
    registry = TaskRegistry()
    task, other = claimed(window_seconds=300), claimed()
    other.name = "tests.schedules.other"
    registry.register(task)
    registry.register(other)
    schedule = in_db(task, key="report:{slot}:namespaced")
    assert Scheduler(include=[schedule], clock=Clock()).tick() == 1
    assert enqueue_slot(schedule, START + timedelta(minutes=1)) == "enqueued"
    worker, database = bodies(sched_queue)
    assert json.loads(database)["taskName"] == task.name
    _same_bytes(worker, database, (START, START + timedelta(minutes=1)))


def test_a_worker_runs_the_task_of_a_slot_enqueued_in_the_database(sched_queue: str) -> None:
    ran: list[Any] = []
    task = claimed(window_seconds=300)
    task.run = ran.append
    assert enqueue_slot(in_db(task), START) == "enqueued"
    batch = queues["sched"].receive(max_messages=10)
    summary = task.consume(batch)
    queues["sched"].settle(batch.messages)  # as the worker does after the batch
    assert ran == [{"n": 1, "é": "{slot}"}]
    assert (summary.ok, summary.failed) == (1, 0)
    assert message_keys(sched_queue) == []


def _cron_database() -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('cron.database_name', true)")
        return cursor.fetchone()[0]


def _jobs(prefix: str) -> list[tuple[Any, ...]]:
    cron_database = _cron_database()
    assert cron_database is not None
    with separate_connection(connection, dbname=cron_database) as conn:
        return conn.execute(
            "SELECT jobname, schedule, command, database FROM cron.job "
            "WHERE database = %s AND starts_with(jobname, %s) ORDER BY jobname",
            [connection.settings_dict["NAME"], prefix],
        ).fetchall()


@pytest.fixture
def declared_in_db(sched_queue: str, request: pytest.FixtureRequest) -> Iterator[Schedule]:
    """An in-database schedule (every 5 minutes; ``@pytest.mark.parametrize``
    ``declared_in_db`` with another timing, indirectly), declared; its jobs
    removed at the end."""
    cron_database = _cron_database()
    if cron_database in (None, connection.settings_dict["NAME"]):
        pytest.skip("needs pg_cron running in another database of this server")
    timing = getattr(request, "param", every(300))
    schedule = schedules.add(
        Schedule("in-db", timing, claimed(300), "report:{slot}", task={}, in_database=True)
    )
    try:
        yield schedule
    finally:
        schedules.remove(schedule.name)
        inside.unschedule_jobs(connection)


def test_migrate_schedules_the_job_and_removes_it_once_the_schedule_is_gone(
    declared_in_db: Schedule,
) -> None:
    after_migrate(using="default", plan=[])
    job = inside.job(declared_in_db)
    database = connection.settings_dict["NAME"]
    expected = (
        f"{job.base}:{database}",
        "*/5 * * * *",
        inside._job_command(declared_in_db),
        database,
    )
    assert _jobs(inside._JOB_PREFIX) == [expected]
    after_migrate(using="default", plan=[])  # again: still one job
    assert _jobs(inside._JOB_PREFIX) == [expected]
    schedules.remove(declared_in_db.name)
    after_migrate(using="default", plan=[])
    assert _jobs(inside._JOB_PREFIX) == []


def _enqueued_by() -> str:
    (row,) = [row for row in overview() if row["name"] == "in-db"]
    return str(row["enqueued_by"])


def _admin_enqueued_by() -> str:
    """The "enqueued by" cell of schedule ``in-db`` on the admin's list."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO taskclaim.schedule (name, last_slot, outcome) "
            "VALUES ('in-db', now(), 'enqueued') ON CONFLICT DO NOTHING"
        )
    page = client_for(staff("viewer", "view_schedulerecord")).get(
        reverse("admin:astral_taskclaim_schedulerecord_changelist")
    )
    cell = page.content.decode().split('<td class="field-enqueued_by">', 1)[1]
    return cell.split("</td>", 1)[0]


def test_the_workers_leave_a_schedule_to_its_job(declared_in_db: Schedule) -> None:
    scheduler = Scheduler(include=[declared_in_db], clock=Clock())
    assert inside.run_by_pg_cron([declared_in_db], "default") == set()
    assert _enqueued_by() == "workers"
    inside.schedule_jobs(connection)
    assert inside.run_by_pg_cron([declared_in_db], "default") == {"in-db"}
    assert _enqueued_by() == "pg_cron"  # as taskclaim_status and its --json say
    assert scheduler.tick() == 0
    assert record("in-db") is None  # nothing enqueued by the worker
    assert _admin_enqueued_by() == "pg_cron"  # and the admin's Schedules page


@pytest.mark.slow
@pytest.mark.parametrize("declared_in_db", [every(60)], indirect=True)
def test_pg_cron_enqueues_the_slot_and_a_worker_runs_it(declared_in_db: Schedule) -> None:
    ran: list[Any] = []
    task = declared_in_db.target
    task.run = ran.append
    after_migrate(using="default", plan=[])
    # pg_cron runs the job at the next minute: the message's NOTIFY wakes us.
    batch = queues["sched"].receive(max_messages=1, wait_seconds=90)
    assert len(batch.messages) == 1
    task.consume(batch)
    slot, outcome, slots = record("in-db") or (None, None, None)
    assert (outcome, slots, ran) == ("enqueued", 1, [{}])
    assert slot is not None
    assert slot.second == 0
    assert batch.messages[0].body["key"] == f"report:{slot_text(slot)}"
