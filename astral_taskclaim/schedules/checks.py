"""System checks of the schedules, each naming the schedule and its task
(registered by :mod:`astral_taskclaim.checks`): E050, a schedule that
cannot work; E051, an ``in_database`` schedule pg_cron cannot run exactly;
W052 (a database check), an ``in_database`` schedule with no pg_cron job,
which the workers enqueue instead; W053, a cron expression whose seconds
field fires more than once a minute (a sixth field typed by mistake)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connections

from astral_taskclaim.core.checks import CHECK_ID
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.not_migrated import missing_tables
from astral_taskclaim.db.grants import applied_migrations
from astral_taskclaim.schedules.in_database import (
    UTC_NAMES,
    cron_timezone,
    in_database_problem,
    run_by_pg_cron,
)
from astral_taskclaim.schedules.schedule import Schedule, declared
from astral_taskclaim.schedules.timing import FIELD_ORDER, Cron, quartz_order
from astral_taskclaim.schedules.upkeep import cron_loaded


def _schedule_problem(schedule: Schedule) -> str | None:
    """Why ``schedule`` cannot work (E050's text), or ``None``."""
    problem = schedule.timing.problem
    if problem is None and schedule.kind == "claimed" and schedule.target.window_seconds is None:
        problem = "the claimed task declares no window_seconds, which each slot's enqueue needs"
    if problem is None and schedule.kind == "django":
        try:
            backend = schedule.target.get_backend()
        except Exception as error:  # the framework's own lookup error, whatever its class
            return f"its Tasks backend cannot be loaded: {error}"
        if not callable(getattr(backend, "queue_for", None)):
            problem = "the Django Task's backend is not a ClaimTaskBackend"
    return problem


@checks.register()
def check_schedules(**kwargs: Any) -> list[checks.CheckMessage]:
    """E050 for a schedule that cannot work, E051 for one declared
    ``in_database`` that pg_cron cannot run exactly, W053 for a cron
    expression firing more than once a minute; naming it and its task."""
    try:
        found = declared()
    except ImproperlyConfigured as error:
        return [checks.Error(str(error), id=CHECK_ID.format("E050"))]
    messages: list[checks.CheckMessage] = [
        checks.Error(
            f"schedule {schedule.name} of task {schedule.target_name}: {problem}",
            obj=schedule.name,
            id=CHECK_ID.format("E050"),
        )
        for schedule in found
        if (problem := _schedule_problem(schedule)) is not None
    ]
    messages.extend(
        _in_database(
            checks.Error,
            "E051",
            schedule,
            f"{problem}.",
            "Change it so pg_cron runs it exactly, or drop in_database (the workers enqueue "
            "it then).",
        )
        for schedule in found
        if schedule.in_database
        and _schedule_problem(schedule) is None
        and (problem := in_database_problem(schedule)) is not None
    )
    messages.extend(
        _seconds_warning(schedule, schedule.timing)
        for schedule in found
        if isinstance(schedule.timing, Cron) and schedule.timing.per_minute > 1
    )
    return messages


def _seconds_warning(schedule: Schedule, timing: Cron) -> checks.CheckMessage:
    """W053: ``timing``'s seconds field fires more than once a minute,
    which a sixth field typed by mistake does (``"*/5 * * * * *"``)."""
    fields = timing.expression.split()
    five = " ".join(fields[:5])
    quartz = quartz_order(timing.expression)
    meant = (
        f", or read seconds first (Quartz order), {quartz!r}"
        if quartz is not None and Cron(quartz).per_minute == 1
        else ""
    )
    times = timing.per_minute
    return checks.Warning(
        f"schedule {schedule.name} of task {schedule.target_name}: cron "
        f"{timing.expression!r} fires {times} times a minute: croniter reads {FIELD_ORDER}, "
        f"so its sixth field, {fields[5]!r}, is the seconds.",
        hint=f"For at most one slot a minute write the five fields alone, {five!r}{meant}. "
        f"If {times} slots a minute are meant, add 'astral_taskclaim.W053' to "
        "SILENCED_SYSTEM_CHECKS.",
        obj=schedule.name,
        id=CHECK_ID.format("W053"),
    )


def _in_database(
    level: type[checks.Error | checks.Warning], id_: str, schedule: Schedule, but: str, hint: str
) -> checks.CheckMessage:
    """Check ``id_`` naming ``schedule`` and its task: declared in_database, but ``but``."""
    return level(
        f"schedule {schedule.name} of task {schedule.target_name} is declared in_database, "
        f"but {but}",
        hint=hint,
        obj=schedule.name,
        id=CHECK_ID.format(id_),
    )


@checks.register(checks.Tags.database)
def check_in_database(
    databases: Sequence[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """W052 for each ``in_database`` schedule no pg_cron job enqueues (not
    loaded, or no job for this database): the workers enqueue it instead.
    E051 for each when pg_cron runs its jobs in a ``cron.timezone`` other
    than UTC (pg_cron 1.6+), which would move their slots off the UTC ones."""
    try:
        alias = app_settings.DATABASE
        inside = [
            s
            for s in declared()
            if s.in_database and _schedule_problem(s) is None and in_database_problem(s) is None
        ]
    except ImproperlyConfigured:
        return []  # reported as E006 or E050
    if not inside or not databases or alias not in databases:
        return []
    try:
        if missing_tables(alias):
            return []  # W030 says to migrate
        loaded = cron_loaded(alias)
        zone = cron_timezone(alias) if loaded else None
        migrated = "0012_schedule_slot" in applied_migrations(connections[alias])
        run = run_by_pg_cron(inside, alias) if loaded and migrated else set()
    except DatabaseError:
        return []  # W007 reports the server
    if zone is not None and zone.lower() not in UTC_NAMES:
        but = f"pg_cron runs its jobs in cron.timezone {zone!r}, not UTC."
        hint = "Set cron.timezone = 'GMT' (its default) in postgresql.conf, or drop in_database."
        return [_in_database(checks.Error, "E051", s, but, hint) for s in inside]
    why = (
        "pg_cron is not loaded"
        if not loaded
        else "pg_cron has no job for it in this database, or one older than its declaration"
    )
    hint = (
        "Load pg_cron (shared_preload_libraries) and run `manage.py migrate` as a user "
        "pg_cron lets schedule jobs, or drop in_database."
    )
    but = f"{why}: the workers enqueue its slots instead."
    return [_in_database(checks.Warning, "W052", s, but, hint) for s in inside if s.name not in run]
