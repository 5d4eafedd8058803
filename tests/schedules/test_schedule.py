"""Declaring schedules (decorator, settings), their checks, the built-in
upkeep, Django Tasks, the worker's hook and what the status shows."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from astral_taskclaim.queues import memory
from astral_taskclaim.schedules import (
    Scheduler,
    cron,
    every,
    periodic,
    schedules,
)
from astral_taskclaim.schedules import checks as schedule_checks
from astral_taskclaim.schedules.schedule import Schedule, _from_settings
from astral_taskclaim.schedules.ticker import declared_schedules
from astral_taskclaim.schedules.upkeep import cron_loaded
from astral_taskclaim.worker.loop import Worker
from tests.claimkit import insert_claim
from tests.schedules.kit import (
    MINUTE_61,
    START,
    Clock,
    claimed,
    message_keys,
    record,
    sched_queue,
    truncate,
)
from tests.tasks_backend import jobs

__all__ = ["sched_queue"]

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def declared() -> Iterator[list[str]]:
    """Names to forget from the registry after the test."""
    names: list[str] = []
    yield names
    for name in names:
        schedules.remove(name)


def test_periodic_declares_a_schedule_and_returns_the_task(declared: list[str]) -> None:
    task = claimed(window_seconds=60)
    declared.append(task.name)
    assert periodic(cron("0 * * * *", zone="Europe/Berlin"), task={"all": 1})(task) is task
    found = schedules.get(task.name)
    assert found is not None
    assert (found.key, found.kind, found.task) == (
        task.name,
        "claimed",
        {"all": 1},
    )
    with pytest.raises(ImproperlyConfigured, match="declared twice"):
        periodic(every(5), name=task.name)(lambda: None)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": "a@b"}, "must not contain '@'"),
        ({"key": ""}, "key must not be empty"),
        ({"missed": "always"}, "missed must be one of"),
        ({"task": None}, "needs task="),
        ({"task": {"x": float("nan")}}, "task"),
    ],
)
def test_a_bad_declaration_raises_naming_the_schedule(
    options: dict[str, Any], message: str
) -> None:
    arguments = {"name": "nightly", "key": "k", "task": {}, **options}
    with pytest.raises((TypeError, ValueError), match=message):
        Schedule(arguments.pop("name"), every(60), claimed(), arguments.pop("key"), **arguments)


#: What a claimed task's schedule with no task says, on the decorator and as E050.
NO_TASK = (
    "schedule nightly of task tests.schedules.report: a claimed task's slot needs task=... "
    '("payload" in TASKCLAIM_SCHEDULES): the JSON value each slot\'s message carries to the '
    "task function, as enqueue(key, task) does; give {} for none "
    "(system check astral_taskclaim.E050)"
)


def test_periodic_without_task_says_what_to_give_as_e050_does() -> None:
    with pytest.raises(ValueError) as raised:
        periodic(every(60), name="nightly")(claimed(window_seconds=60))
    assert str(raised.value) == NO_TASK
    assert schedules.get("nightly") is None
    entry = {"task": "tests.schedules.test_schedule.NIGHTLY", "every": 60}
    with override_settings(TASKCLAIM_SCHEDULES={"nightly": entry}):
        (error,) = schedule_checks.check_schedules()
    assert (error.id, error.msg) == (
        "astral_taskclaim.E050",
        f"TASKCLAIM_SCHEDULES['nightly']: {NO_TASK}",
    )


#: A claimed task for a TASKCLAIM_SCHEDULES entry to name.
NIGHTLY = claimed(window_seconds=60)


def test_settings_declare_schedules_of_other_apps_tasks() -> None:
    (found,) = _from_settings(
        {"rooms": {"task": "tests.tasks_backend.jobs.refresh", "cron": "*/5 * * * *", "args": [7]}}
    )
    assert (found.name, found.kind, found.args, found.timing.describe()) == (
        "rooms",
        "django",
        (7,),
        "*/5 * * * * (UTC)",
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"task": "tests.nowhere.job", "every": 5}, "TASKCLAIM_SCHEDULES\\['x'\\]: .*nowhere"),
        ({"task": "tests.tasks_backend.jobs.add", "every": 5, "cron": "* * * * *"}, "exactly one"),
        ({"task": "tests.tasks_backend.jobs.add", "every": 5, "when": 1}, "unknown entry 'when'"),
        ({"task": "tests.tasks_backend.jobs.add", "every": 0}, "whole number of seconds"),
    ],
)
def test_a_bad_settings_entry_is_an_error_naming_it(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=message):
        _from_settings({"x": entry})
    with override_settings(TASKCLAIM_SCHEDULES={"x": entry}):
        (error,) = schedule_checks.check_schedules()
    assert error.id == "astral_taskclaim.E050"


def test_e040_names_the_task_of_a_bad_expression_or_zone(declared: list[str]) -> None:
    task = claimed(window_seconds=60)
    declared.extend(["bad-expression", "bad-zone", "no-window"])
    periodic(cron("61 * * * *"), name="bad-expression", task={})(task)
    periodic(cron("0 * * * *", zone="Mars/Olympus"), name="bad-zone", task={})(task)
    periodic(every(60), name="no-window", task={})(claimed(window_seconds=None))  # type: ignore[arg-type]
    found = {m.obj: m.msg for m in schedule_checks.check_schedules()}
    assert found == {
        "bad-expression": "schedule bad-expression of task tests.schedules.report: "
        f"not a cron expression: '61 * * * *': {MINUTE_61}",
        "bad-zone": "schedule bad-zone of task tests.schedules.report: "
        "unknown time zone 'Mars/Olympus'",
        "no-window": "schedule no-window of task tests.schedules.report: the claimed task "
        "declares no window_seconds, which each slot's enqueue needs",
    }
    assert all(m.id == "astral_taskclaim.E050" for m in schedule_checks.check_schedules())


@override_settings(TASKCLAIM_UPKEEP=True)
def test_without_pg_cron_the_workers_run_the_upkeep_as_schedules() -> None:
    truncate()
    names = {s.name for s in declared_schedules()}
    upkeep = {"taskclaim.delete_expired", "taskclaim.delete_task_results"}
    assert (upkeep <= names) == (not cron_loaded("default"))
    with override_settings(TASKCLAIM_UPKEEP=False):
        assert not upkeep & {s.name for s in declared_schedules()}
    if cron_loaded("default"):
        return
    insert_claim("old", seconds=-5)
    insert_claim("young", seconds=60)
    clock = Clock(START.replace(minute=15))
    assert Scheduler(clock=clock).tick() == 1  # the claims' cleanup, at minute 15
    with connection.cursor() as cursor:
        cursor.execute("SELECT key FROM taskclaim.claim WHERE key IN ('old', 'young')")
        assert cursor.fetchall() == [("young",)]
    assert record("taskclaim.delete_expired") == (clock.now, "ran", 1)
    truncate()


def test_a_django_task_schedule_enqueues_a_run_keyed_by_its_slot() -> None:
    truncate()
    schedule = Schedule("rooms", every(60), jobs.refresh, "rooms:{slot}", args=(7,))
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.task_result")
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = 'default'")
    assert Scheduler(include=[schedule], clock=Clock()).tick() == 1
    assert Scheduler(include=[schedule], clock=Clock()).tick() == 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM taskclaim.task_result")
        assert cursor.fetchone() == (1,)
        cursor.execute("DELETE FROM taskclaim.task_result")
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = 'default'")
    assert record("rooms") == (START, "enqueued", 1)
    truncate()


def test_the_worker_ticks_its_scheduler_every_loop_turn(sched_queue: str) -> None:
    ran: list[int] = []
    scheduler = Scheduler(include=[Schedule("beat", every(60), lambda: ran.append(1), "beat")])
    queues = {"mem": {"BACKEND": "astral_taskclaim.queues.memory.MemoryQueue"}}
    memory.reset()
    with override_settings(TASKCLAIM_QUEUES=queues):
        worker = Worker("mem", task=claimed(), burst=True, wait=0, scheduler=scheduler)
        worker.run()
    memory.reset()
    assert ran == [1]


def test_taskclaim_status_shows_each_schedule(sched_queue: str, declared: list[str]) -> None:
    task = claimed(window_seconds=60)
    declared.append("status-shown")
    periodic(cron("30 2 * * *", zone="Europe/Berlin"), name="status-shown", task={})(task)
    Scheduler(
        include=[schedules.get("status-shown")], clock=Clock(START.replace(hour=1, minute=31))
    ).tick()  # type: ignore[list-item]
    out = io.StringIO()
    call_command("taskclaim_status", "--json", stdout=out)
    (row,) = [r for r in json.loads(out.getvalue())["schedules"] if r["name"] == "status-shown"]
    assert {k: row[k] for k in ("task", "expression", "zone", "last_slot", "outcome")} == {
        "task": "tests.schedules.report",
        "expression": "30 2 * * *",
        "zone": "Europe/Berlin",
        "last_slot": "2026-12-01T01:30:00Z",
        "outcome": "enqueued",
    }
    assert message_keys(sched_queue) == ["status-shown"]
    out = io.StringIO()
    call_command("taskclaim_status", stdout=out)
    assert (
        "schedule status-shown: tests.schedules.report 30 2 * * * Europe/Berlin" in out.getvalue()
    )


def test_e040_for_a_django_task_of_another_backend() -> None:
    from astral_taskclaim.tasks_backend.compat import FRAMEWORK

    immediate = f"{FRAMEWORK}.backends.immediate.ImmediateBackend"
    tasks = {
        "default": {"BACKEND": "astral_taskclaim.tasks_backend.ClaimTaskBackend"},
        "other": {"BACKEND": immediate},
    }
    with override_settings(TASKS=tasks):
        schedule = Schedule("elsewhere", every(60), jobs.add.using(backend="other"), "k")
        assert schedule_checks._schedule_problem(schedule) == (
            "the Django Task's backend is not a ClaimTaskBackend"
        )
