"""Deleting finished Django Task results older than
``TASKCLAIM_TASK_RESULTS_RETENTION``, by command or by pg_cron.

:func:`delete_old_results` is what ``manage.py taskclaim_delete_task_results``
runs. Where pg_cron is loaded, job ``taskclaim-task-results`` (minute 45 of
every hour) is scheduled after every ``migrate`` (the app's ``post_migrate``
handler), not by a migration: the retention is a setting, so each
``migrate``, or ``taskclaim_delete_task_results --schedule``, schedules it
with the retention in force then. pg_cron running in another database of the
server is reached with ``cron.schedule_in_database``; where pg_cron is not
loaded or refuses, the job is skipped (logged) and the command does the work.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from django.db.backends.base.base import BaseDatabaseWrapper

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.db import sqlfiles
from astral_taskclaim.db.connections import separate_connection

logger = logging.getLogger(__name__)

JOB_NAME = "taskclaim-task-results"
JOB_SCHEDULE = "45 * * * *"


def delete_old_results(connection: BaseDatabaseWrapper, older_than: int) -> int:
    """Deletes results finished more than ``older_than`` seconds ago; how many."""
    if isinstance(older_than, bool) or not isinstance(older_than, int) or older_than < 0:
        raise ValueError(f"older_than must be an int of seconds from 0, got {older_than!r}")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT taskclaim.delete_task_results(make_interval(secs => %s))", [older_than]
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def job_command(retention: int) -> str:
    """The job's SQL for a retention of ``retention`` seconds."""
    return (
        "SET statement_timeout = '60s'; "
        f"SELECT taskclaim.delete_task_results(make_interval(secs => {int(retention)}));"
    )


def schedule_job(connection: BaseDatabaseWrapper) -> str:
    """Schedules (or reschedules) the job for the app's database with the
    current retention, or removes it when results are kept forever; what
    was done, for the caller to show."""
    retention = app_settings.TASK_RESULTS_RETENTION
    state = _state(connection)
    cron_database, database = state["cron_database"], state["database"]
    if cron_database is None:
        return _skipped("pg_cron is not loaded")
    params: dict[str, Any] = {"name": JOB_NAME, "schedule": JOB_SCHEDULE, "database": database}
    try:
        if cron_database == database:
            if not state["installed"]:
                return _skipped(f"pg_cron is not installed in database {database}")
            _run(connection.connection, retention, params)
        else:
            with separate_connection(connection, dbname=cron_database) as other:
                _run(other, retention, params)
    except psycopg.Error as error:
        return _skipped(f"pg_cron in database {cron_database} refused ({type(error).__name__})")
    if retention is None:
        return f"pg_cron job {JOB_NAME} removed: results are kept forever"
    return f"pg_cron job {JOB_NAME} deletes results finished over {retention} s ago"


def unschedule_job(connection: BaseDatabaseWrapper) -> None:
    """Removes the job of the app's database, where pg_cron has it."""
    state = _state(connection)
    cron_database, database = state["cron_database"], state["database"]
    if cron_database is None or (cron_database == database and not state["installed"]):
        return
    params = {"name": JOB_NAME, "database": database}
    try:
        if cron_database == database:
            connection.connection.execute(sqlfiles.read("tasks/jobs/unschedule.sql"), params)
        else:
            with separate_connection(connection, dbname=cron_database) as other:
                other.execute(sqlfiles.read("tasks/jobs/unschedule.sql"), params)
    except psycopg.Error as error:
        logger.warning(
            "could not remove %s: %s",
            *(JOB_NAME, type(error).__name__),
            extra={"event": "tasks.cron_job_unschedule_failed"},
        )


def _run(conn: psycopg.Connection[Any], retention: int | None, params: dict[str, Any]) -> None:
    conn.execute(sqlfiles.read("tasks/jobs/unschedule.sql"), params)
    if retention is None:
        return
    path = "tasks/jobs/schedule.sql"
    if conn.info.dbname != params["database"]:
        path = "tasks/jobs/schedule_in_database.sql"
    conn.execute(sqlfiles.read(path), {**params, "command": job_command(retention)})


def _state(connection: BaseDatabaseWrapper) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute(sqlfiles.read("taskclaim/jobs/state.sql"))
        names = [column.name for column in cursor.description]
        return dict(zip(names, cursor.fetchone(), strict=True))


def _skipped(reason: str) -> str:
    text = f"{reason}; pg_cron job {JOB_NAME} skipped: run taskclaim_delete_task_results instead"
    logger.warning(text, extra={"event": "tasks.cron_job_skipped"})
    return text
