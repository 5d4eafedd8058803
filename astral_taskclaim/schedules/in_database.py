"""Schedules enqueued inside PostgreSQL by pg_cron (``in_database=True``).

Each such schedule gets a pg_cron job (:mod:`astral_taskclaim.db.cron`)
calling ``taskclaim.enqueue_schedule_slot()``, which claims the slot's key,
enqueues the task and records the slot in one transaction. Workers leave
a schedule alone while its job exists (:func:`run_by_pg_cron`) and tick it
otherwise (W052); the one slot claim keeps it exactly once either way.

Only what pg_cron runs exactly is accepted (E051): UTC five-field cron or
an interval a UTC cron gives exactly, for a claimed task on a PostgreSQL
queue in ``TASKCLAIM_DATABASE``, its body as the workers write it
(:func:`_body_halves`).
"""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg import sql

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.envelope import encode_json
from astral_taskclaim.core.tracing import untraced
from astral_taskclaim.db import cron as pg_cron
from astral_taskclaim.db import statements
from astral_taskclaim.queues import queues
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.schedules.schedule import Schedule, declared
from astral_taskclaim.schedules.timing import Cron, Every, Timing

logger = logging.getLogger(__name__)

#: Every schedule job's name starts so: ``taskclaim-schedule-<12 hex>``, a
#: hash of the schedule's name, since pg_cron keeps 63 bytes of a job name.
_JOB_PREFIX = "taskclaim-schedule-"
#: How long a slot's claim outlives its grace, for the workers and pg_cron
#: alike: a slot is tried only while in grace (or, missed, until the record
#: shows it), so it never doubles.
SLOT_MARGIN = 60.0

#: Zone names that are UTC, as a schedule's zone or pg_cron's ``cron.timezone``.
UTC_NAMES = frozenset({"utc", "etc/utc", "gmt", "etc/gmt", "uct", "etc/uct", "zulu", "etc/zulu"})
# A cron field pg_cron and croniter read alike: numbers, *, ranges, lists, steps.
_FIELD = re.compile(r"[0-9*,/-]+")


def _pg_cron_expression(timing: Timing) -> str:
    """The UTC cron expression pg_cron runs for ``timing``, at exactly its
    slots; ``ValueError`` saying why there is none."""
    if isinstance(timing, Every):
        minutes, hours = timing.seconds // 60, timing.seconds / 3600
        if timing.seconds % 60 == 0 and minutes < 60 and 60 % minutes == 0:
            return "* * * * *" if minutes == 1 else f"*/{minutes} * * * *"
        if hours.is_integer() and 24 % int(hours) == 0:
            return {1: "0 * * * *", 24: "0 0 * * *"}.get(int(hours), f"0 */{int(hours)} * * *")
        raise ValueError(
            f"pg_cron cannot run every({timing.seconds}) on its slots: give whole minutes "
            "dividing an hour, whole hours dividing a day, or a day"
        )
    if not isinstance(timing, Cron) or timing.problem is not None:
        raise ValueError("pg_cron runs cron(...) or every(...) timings only")
    if timing.zone_name.lower() not in UTC_NAMES:
        raise ValueError(
            f"pg_cron runs cron expressions in UTC, not {timing.zone_name}: give zone='UTC' "
            "(with the hours moved), or leave the schedule to the workers"
        )
    fields = timing.expression.split()
    if len(fields) != 5 or not all(_FIELD.fullmatch(field) for field in fields):
        raise ValueError(
            f"pg_cron cannot run {timing.expression!r} exactly: give five fields of numbers, "
            "'*', ranges, lists and steps (no names, macros, seconds, L, W or #)"
        )
    if fields[2] != "*" and fields[4] != "*":
        # pg_cron (Vixie cron) and croniter disagree on some such pairs.
        raise ValueError(
            f"{timing.expression!r} sets both the day of month and the day of week, "
            "which pg_cron and croniter read differently: set one of them"
        )
    return " ".join(fields)


def in_database_problem(schedule: Schedule) -> str | None:
    """Why ``schedule`` (declared ``in_database``) cannot be enqueued by
    pg_cron exactly as the workers would (E051's text), or ``None``."""
    if schedule.kind != "claimed":
        return "only a claimed task's slots can be enqueued inside the database"
    try:
        _pg_cron_expression(schedule.timing)
    except ValueError as error:
        return str(error)
    target: Any = schedule.target
    if target.window_seconds is None:
        return "the claimed task declares no window_seconds"
    try:
        queue = queues[target.queue]
    except Exception as error:  # reported by the queues' own checks too
        return f"its queue {target.queue!r} cannot be loaded: {error}"
    if not isinstance(queue, PostgresQueue) or queue.claimed_insert(app_settings.DATABASE) is None:
        return (
            f"its queue {target.queue!r} is not a PostgreSQL queue in TASKCLAIM_DATABASE "
            "(with the stock send), where the database writes the slot's message"
        )
    if "{slot}" in (target.key_namespace or ""):
        return "its task's key_namespace contains '{slot}'"
    return None


def job(schedule: Schedule) -> pg_cron.Job:
    """The pg_cron job of ``schedule``: its name's base and UTC cron expression."""
    digest = hashlib.sha256(schedule.name.encode("utf-8")).hexdigest()[:12]
    return pg_cron.Job(_JOB_PREFIX + digest, _pg_cron_expression(schedule.timing))


def _body_halves(schedule: Schedule) -> tuple[str, str]:
    """The message body a worker enqueues for a slot of ``schedule``, as the
    text before and after its claim token: written by the task's own queue
    (``taskName`` where that queue carries several tasks), with ``{slot}``
    of the key left for the database to fill in."""
    target: Any = schedule.target
    window = target.window_seconds
    marker = str(uuid.uuid4())  # a fresh UUID, so it is nowhere in the task
    key = target.claim_key(schedule.key)
    task_json = encode_json(schedule.task, name=f"schedule {schedule.name}: task")
    insert = target._queue().claimed_insert(app_settings.DATABASE)
    assert insert is not None  # as in_database_problem() made sure
    with untraced():  # every slot starts a trace of its own
        head, tail = insert.writer(window)(key, marker, schedule.task, task_json).split(marker)
    return head, tail


def _slot_arguments(schedule: Schedule) -> dict[str, Any]:
    """The arguments of ``taskclaim.enqueue_schedule_slot()`` for ``schedule``
    (all but ``slot``, which defaults to the minute the job runs in)."""
    target: Any = schedule.target
    queue = queues[target.queue]
    assert isinstance(queue, PostgresQueue)  # as in_database_problem() made sure
    head, tail = _body_halves(schedule)
    return {
        "schedule": schedule.name,
        "slot_seconds": float(schedule.grace_seconds + SLOT_MARGIN),
        "queue": queue.queue_name,
        "task_key": target.claim_key(schedule.key),
        "window_seconds": float(target.window_seconds),
        "body_head": head,
        "body_tail": tail,
    }


def _job_command(schedule: Schedule) -> str:
    """The SQL ``schedule``'s job runs: one call of
    ``taskclaim.enqueue_schedule_slot()`` with :func:`_slot_arguments`."""
    listed = ", ".join(
        f"{name} => {sql.Literal(value).as_string(None)}"
        for name, value in _slot_arguments(schedule).items()
    )
    return f"SET statement_timeout = '30s'; SELECT taskclaim.enqueue_schedule_slot({listed});"


def _wanted() -> list[Schedule]:
    return [s for s in declared() if s.in_database and in_database_problem(s) is None]


def schedule_jobs(connection: BaseDatabaseWrapper, *, quiet: bool = False) -> list[str]:
    """Schedules (or reschedules) a job per in-database schedule for the
    database of ``connection`` and removes this database's jobs of schedules
    no longer declared; why each job was skipped (none: all scheduled). A
    skipped job is logged as a warning, or at INFO with ``quiet`` when
    pg_cron is not loaded (W052 reports it)."""
    wanted = _wanted()
    skipped = []
    for schedule in wanted:
        reason = pg_cron.schedule_job(connection, job(schedule), _job_command(schedule))
        if reason is None:
            continue
        text = f"{reason}; schedule {schedule.name}'s pg_cron job skipped: the workers enqueue it"
        level = logging.INFO if quiet and reason == "pg_cron is not loaded" else logging.WARNING
        logger.log(level, text, extra={"event": "schedule.cron_job_skipped"})
        skipped.append(text)
    pg_cron.unschedule_others(connection, _JOB_PREFIX, [job(s) for s in wanted])
    return skipped


def cron_timezone(alias: str) -> str | None:
    """pg_cron's ``cron.timezone`` on the server of ``alias`` (``None``: a
    pg_cron without the setting, before 1.6, which runs in GMT)."""
    value = statements.Connector(alias).fetch("schedule/cron_timezone.sql", {})[0][0]
    return value or None


def unschedule_jobs(connection: BaseDatabaseWrapper) -> None:
    """Removes every schedule job of the database of ``connection``."""
    pg_cron.unschedule_others(connection, _JOB_PREFIX, [])


def run_by_pg_cron(schedules: list[Schedule], alias: str) -> set[str]:
    """The names of ``schedules`` a pg_cron job enqueues (so the workers
    leave them): declared ``in_database``, and the job is there, running
    what the declaration says (a job ``migrate`` has not rescheduled since
    the declaration changed leaves the schedule to the workers)."""
    inside = [s for s in schedules if s.in_database and in_database_problem(s) is None]
    if not inside:
        return set()
    connection = connections[alias]
    return {s.name for s in inside if pg_cron.has_job(connection, job(s), _job_command(s)) is True}
