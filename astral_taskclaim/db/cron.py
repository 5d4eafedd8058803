"""Scheduling pg_cron's cleanup job for the app's database from a migration.

pg_cron runs jobs from one database, ``cron.database_name``. Where that is
the app's database, the job is scheduled there with ``cron.schedule`` as
``taskclaim-ttl``, the TypeScript package's name. Where it is another
database on the same server (managed services often use ``postgres``), the
job is scheduled from that database with ``cron.schedule_in_database`` over
a second connection, as ``taskclaim-ttl:<database>``: pg_cron names jobs per
user, so two app databases on one server (two projects, staging and
production) each keep a job of their own. Where pg_cron is missing or
refuses, the job is skipped with a NOTICE, check ``astral_taskclaim.W004``
or ``W032`` says so, and ``manage.py taskclaim_delete_expired`` takes its
place.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from astral_taskclaim.db import sqlfiles
from astral_taskclaim.db.connections import separate_connection

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
    name = job_name(database, cron_database)
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
            conn.execute(
                sqlfiles.read("taskclaim/jobs/forget_stale.sql"),
                {"database": database, "name": name},
            )
            conn.execute(
                sqlfiles.read("taskclaim/jobs/schedule_in_database.sql"), {**params, "name": name}
            )
    except psycopg.Error as error:
        _skip(
            schema_editor,
            f"pg_cron runs in database {cron_database}, which refused to "
            f"schedule {name} for {database} ({type(error).__name__}); skipping",
        )


def job_name(database: str, cron_database: str) -> str:
    """The job's name: ``taskclaim-ttl`` in pg_cron's own database (as the
    TypeScript package names it), ``taskclaim-ttl:<database>`` elsewhere."""
    return JOB_NAME if database == cron_database else f"{JOB_NAME}:{database}"


def has_cleanup_job(connection: BaseDatabaseWrapper) -> bool | None:
    """Whether an active pg_cron job deletes expired claims in the database
    of ``connection``; ``None`` when pg_cron is not loaded or its jobs
    cannot be read from here. Only jobs this user may see count (pg_cron
    shows a user its own jobs; a superuser sees all)."""
    with connection.cursor() as cursor:
        cursor.execute(sqlfiles.read("taskclaim/jobs/state.sql"))
        cron_database, database, installed, _ = cursor.fetchone()
        if cron_database is None:
            return None
        params = {"database": database}
        if cron_database == database:
            if not installed:
                return False
            cursor.execute(sqlfiles.read("taskclaim/jobs/find.sql"), params)
            return bool(cursor.fetchone()[0])
    try:
        with separate_connection(connection, dbname=cron_database) as conn:
            if conn.execute("SELECT to_regclass('cron.job') IS NOT NULL").fetchone() != (True,):
                return False
            row = conn.execute(sqlfiles.read("taskclaim/jobs/find.sql"), params).fetchone()
    except psycopg.Error:
        return None
    return bool(row and row[0])


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
            "could not remove the taskclaim job from database %s: %s",
            cron_database,
            type(error).__name__,
            extra={"event": "taskclaim.cron_job_unschedule_failed"},
        )
