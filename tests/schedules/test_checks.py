"""The schedules' checks for ``in_database``: E051 for what pg_cron cannot
run exactly, W052 for a schedule no pg_cron job enqueues, each naming the
schedule; and the option itself, on the decorator and in settings. W053
for a cron expression firing more than once a minute."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import override_settings

from astral_taskclaim.schedules import checks as schedule_checks
from astral_taskclaim.schedules import cron, every, periodic, schedules
from astral_taskclaim.schedules import in_database as inside
from astral_taskclaim.schedules.schedule import Schedule, _from_settings
from astral_taskclaim.schedules.upkeep import cron_loaded
from tests.schedules.kit import POSTGRES, claimed, sched_queue

__all__ = ["sched_queue"]

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def declared(sched_queue: str) -> Iterator[list[str]]:
    """Names to forget from the registry (and their jobs) after the test."""
    names: list[str] = []
    yield names
    for name in names:
        schedules.remove(name)
    inside.unschedule_jobs(connection)


def _messages(id_: str) -> dict[Any, str]:
    found = [*schedule_checks.check_schedules()]
    found += schedule_checks.check_in_database(databases=["default"])
    return {m.obj: m.msg for m in found if m.id == f"astral_taskclaim.{id_}"}


def test_the_option_is_declared_on_the_decorator_and_in_settings(declared: list[str]) -> None:
    declared.append("hourly")
    periodic(every(3600), name="hourly", task={}, in_database=True)(claimed(60))
    found = schedules.get("hourly")
    assert found is not None
    assert found.in_database
    entry = {"task": "tests.tasks_backend.jobs.add", "every": 60, "in_database": True}
    (from_setting,) = _from_settings({"nightly": entry})
    assert from_setting.in_database
    with pytest.raises(ImproperlyConfigured, match="in_database must be True or False"):
        _from_settings({"nightly": {**entry, "in_database": "yes"}})


def test_e051_names_each_schedule_pg_cron_cannot_run_exactly(declared: list[str]) -> None:
    task = claimed(window_seconds=60)
    declared.extend(["berlin", "ninety", "function", "fine"])
    periodic(cron("0 3 * * *", zone="Europe/Berlin"), name="berlin", task={}, in_database=True)(
        task
    )
    periodic(every(90), name="ninety", task={}, in_database=True)(task)
    schedules.add(Schedule("function", every(60), lambda: None, "f", in_database=True))
    periodic(every(60), name="fine", task={}, in_database=True)(task)
    found = _messages("E051")
    assert set(found) == {"berlin", "ninety", "function"}
    assert found["berlin"].startswith(
        "schedule berlin of task tests.schedules.report is declared in_database, but pg_cron "
        "runs cron expressions in UTC, not Europe/Berlin"
    )
    assert "every(90)" in found["ninety"]
    assert "only a claimed task's slots" in found["function"]


def test_e051_names_a_schedule_whose_queue_is_not_the_postgresql_queue(
    declared: list[str],
) -> None:
    queues = {
        "default": {"BACKEND": POSTGRES},
        "sched": {"BACKEND": "astral_taskclaim.queues.memory.MemoryQueue"},
    }
    declared.append("on-memory")
    periodic(every(60), name="on-memory", task={}, in_database=True)(claimed(60))
    with override_settings(TASKCLAIM_QUEUES=queues):
        found = _messages("E051")
    assert list(found) == ["on-memory"]
    assert "its queue 'sched' is not a PostgreSQL queue in TASKCLAIM_DATABASE" in found["on-memory"]


def test_w052_names_a_schedule_no_pg_cron_job_enqueues(declared: list[str]) -> None:
    declared.append("five-minutes")
    periodic(every(300), name="five-minutes", task={}, in_database=True)(claimed(60))
    loaded = cron_loaded("default")
    why = (
        "pg_cron has no job for it in this database, or one older than its declaration"
        if loaded
        else "pg_cron is not loaded"
    )
    assert _messages("W052") == {
        "five-minutes": "schedule five-minutes of task tests.schedules.report is declared "
        f"in_database, but {why}: the workers enqueue its slots instead."
    }
    skipped = inside.schedule_jobs(connection)
    if not loaded:
        assert skipped == [
            "pg_cron is not loaded; schedule five-minutes's pg_cron job skipped: "
            "the workers enqueue it"
        ]
        return
    assert skipped == []
    assert _messages("W052") == {}  # the job is there now
    # Declared anew without a migrate: the job still runs the old payload,
    # so it does not count, and the workers enqueue the schedule meanwhile.
    schedules.remove("five-minutes")
    periodic(every(300), name="five-minutes", task={"v": 2}, in_database=True)(claimed(60))
    assert list(_messages("W052")) == ["five-minutes"]
    assert inside.schedule_jobs(connection) == []
    assert _messages("W052") == {}


def test_e051_names_each_schedule_when_pg_cron_runs_in_another_zone(
    declared: list[str],
) -> None:
    if not cron_loaded("default"):
        pytest.skip("needs pg_cron")
    declared.append("five-minutes")
    periodic(every(300), name="five-minutes", task={}, in_database=True)(claimed(60))
    with connection.cursor() as cursor:
        # Where pg_cron defines it, a postgresql.conf setting; this session's
        # value stands in for it.
        cursor.execute("SET cron.timezone = 'Europe/Berlin'")
    try:
        found = _messages("E051")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET cron.timezone")
    assert found == {
        "five-minutes": "schedule five-minutes of task tests.schedules.report is declared "
        "in_database, but pg_cron runs its jobs in cron.timezone 'Europe/Berlin', not UTC."
    }
    assert _messages("W052") != {}  # with the setting reset, only the missing job


def test_w053_names_a_cron_expression_firing_more_than_once_a_minute(
    declared: list[str],
) -> None:
    task = claimed(window_seconds=60)
    declared.extend(["typo", "quartz", "twice", "minutely", "at-second-7", "every-second"])
    periodic(cron("*/5 * * * * *"), name="typo", task={})(task)
    periodic(cron("0 0 * * * *"), name="quartz", task={})(task)
    periodic(cron("0 * * * * 0,30"), name="twice", task={})(task)
    periodic(cron("*/5 * * * *"), name="minutely", task={})(task)
    periodic(cron("* * * * * 7"), name="at-second-7", task={})(task)
    periodic(every(1), name="every-second", task={})(task)
    setting = {"task": "tests.tasks_backend.jobs.add", "cron": "* * * * * *", "args": [1, 2]}
    with override_settings(TASKCLAIM_SCHEDULES={"from-settings": setting}):
        found = {
            m.obj: (m.msg, m.hint)
            for m in schedule_checks.check_schedules()
            if m.id == "astral_taskclaim.W053"
        }
    order = (
        "croniter reads five fields, minute hour day-of-month month day-of-week, with an "
        "optional sixth for seconds at the end (croniter's order, not Quartz's "
        "seconds-first; a seventh after it is the year)"
    )
    silence = "add 'astral_taskclaim.W053' to SILENCED_SYSTEM_CHECKS."
    assert found == {
        "typo": (
            "schedule typo of task tests.schedules.report: cron '*/5 * * * * *' fires 60 "
            f"times a minute: {order}, so its sixth field, '*', is the seconds.",
            "For at most one slot a minute write the five fields alone, '*/5 * * * *'. "
            f"If 60 slots a minute are meant, {silence}",
        ),
        "quartz": (
            "schedule quartz of task tests.schedules.report: cron '0 0 * * * *' fires 60 "
            f"times a minute: {order}, so its sixth field, '*', is the seconds.",
            "For at most one slot a minute write the five fields alone, '0 0 * * *', or read "
            "seconds first (Quartz order), '0 * * * * 0'. "
            f"If 60 slots a minute are meant, {silence}",
        ),
        "twice": (
            "schedule twice of task tests.schedules.report: cron '0 * * * * 0,30' fires 2 "
            f"times a minute: {order}, so its sixth field, '0,30', is the seconds.",
            "For at most one slot a minute write the five fields alone, '0 * * * *'. "
            f"If 2 slots a minute are meant, {silence}",
        ),
        "from-settings": (
            "schedule from-settings of task tests.tasks_backend.jobs.add: cron "
            f"'* * * * * *' fires 60 times a minute: {order}, so its sixth field, '*', "
            "is the seconds.",
            "For at most one slot a minute write the five fields alone, '* * * * *'. "
            f"If 60 slots a minute are meant, {silence}",
        ),
    }
