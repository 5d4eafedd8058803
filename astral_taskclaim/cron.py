"""Scheduling pg_cron's ``taskclaim-ttl`` job from a migration.

pg_cron runs jobs from one database, ``cron.database_name``. Where that is
the app's database, the job is scheduled there with ``cron.schedule``. Where
it is another database on the same server (managed services often use
``postgres``), the job is scheduled from that database with
``cron.schedule_in_database`` over a second connection, when pg_cron has it
and the connection is allowed. Everywhere else the job is skipped with a
NOTICE and ``manage.py taskclaim_delete_expired`` takes its place.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from . import sqlfiles
from .connections import separate_connection

logger = logging.getLogger(__name__)

JOB_NAME = "taskclaim-ttl"
JOB_SCHEDULE = "15 * * * *"


def job_command() -> str:
    """The job's SQL, exactly as the TypeScript package schedules it."""
    return sqlfiles.read("taskclaim/jobs/command.sql")


def _state(schema_editor: BaseDatabaseSchemaEditor) -> dict[str, Any]:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(sqlfiles.read("taskclaim/jobs/state.sql"))
        names = [column.name for column in cursor.description]
        return dict(zip(names, cursor.fetchone(), strict=True))


def _execute(schema_editor: BaseDatabaseSchemaEditor, path: str, params: dict[str, str]) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(sqlfiles.read(path), params)


def _skip(schema_editor: BaseDatabaseSchemaEditor, message: str) -> None:
    logger.warning(message, extra={"event": "taskclaim.cron_job_skipped"})
    _execute(schema_editor, "taskclaim/jobs/notice.sql", {"message": message})


def schedule(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Schedules the job for the app's database, or skips it with a NOTICE."""
    state = _state(schema_editor)
    cron_database, database = state["cron_database"], state["database"]
    params = {"command": job_command(), "database": database}
    if cron_database is None:
        _skip(schema_editor, "pg_cron is not loaded; skipping taskclaim jobs")
        return
    if cron_database == database:
        if not state["installed"]:
            if not state["superuser"]:
                _skip(
                    schema_editor,
                    "pg_cron is loaded but not installed in this database; "
                    "run CREATE EXTENSION pg_cron as a superuser, then migrate again",
                )
                return
            schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_cron", params=None)
        _execute(schema_editor, "taskclaim/jobs/schedule.sql", params)
        return
    try:
        with separate_connection(schema_editor.connection, dbname=cron_database) as conn:
            has_function = conn.execute(
                "SELECT to_regproc('cron.schedule_in_database') IS NOT NULL"
            ).fetchone()
            if not (has_function and has_function[0]):
                _skip(
                    schema_editor,
                    f"pg_cron in database {cron_database} cannot schedule jobs "
                    f"for {database} (no cron.schedule_in_database); skipping taskclaim jobs",
                )
                return
            # pg_cron names jobs per user, and rescheduling a name keeps its
            # database: a job left by a dropped database is replaced, one
            # serving another live database is left alone (one app per cluster).
            existing = conn.execute(sqlfiles.read("taskclaim/jobs/existing.sql")).fetchone()
            if existing is not None and existing[0] != database:
                if existing[1]:
                    _skip(
                        schema_editor,
                        f"pg_cron job taskclaim-ttl already runs for database {existing[0]}; "
                        f"one app database per cluster, skipping it for {database}",
                    )
                    return
                conn.execute(
                    sqlfiles.read("taskclaim/jobs/unschedule.sql"), {"database": existing[0]}
                )
            conn.execute(sqlfiles.read("taskclaim/jobs/schedule_in_database.sql"), params)
    except psycopg.Error as error:
        _skip(
            schema_editor,
            f"pg_cron runs in database {cron_database}, which refused to "
            f"schedule taskclaim-ttl for {database} ({type(error).__name__}); skipping",
        )


def unschedule(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Removes the job this database's migration scheduled, wherever it is."""
    state = _state(schema_editor)
    cron_database, database = state["cron_database"], state["database"]
    params = {"database": database}
    statement = sqlfiles.read("taskclaim/jobs/unschedule.sql")
    if cron_database is None:
        return
    if cron_database == database:
        if state["installed"]:
            _execute(schema_editor, "taskclaim/jobs/unschedule.sql", params)
        return
    try:
        with separate_connection(schema_editor.connection, dbname=cron_database) as conn:
            if conn.execute("SELECT to_regclass('cron.job') IS NOT NULL").fetchone() == (True,):
                conn.execute(statement, params)
    except psycopg.Error as error:
        logger.warning(
            "could not remove taskclaim-ttl from database %s: %s",
            cron_database,
            type(error).__name__,
            extra={"event": "taskclaim.cron_job_unschedule_failed"},
        )
