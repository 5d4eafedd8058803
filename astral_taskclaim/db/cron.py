"""Scheduling the app's pg_cron jobs: the claims cleanup (:data:`CLAIMS_JOB`,
migration 0003), the results cleanup and the in-database schedules' jobs
(after every ``migrate``; :func:`unschedule_others` removes those gone).

pg_cron runs jobs from one database, ``cron.database_name``. There a job
keeps its base name; from another database on the server it is scheduled
with ``cron.schedule_in_database`` as ``<base>:<database>``, so two app
databases on one server keep a job each. Jobs of dropped databases are
removed. Where pg_cron is missing or refuses, the caller says why (W004,
W032) and the cleanup commands take the job's place.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import psycopg
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from astral_taskclaim.db import sqlfiles
from astral_taskclaim.db.connections import separate_connection

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """One of the app's pg_cron jobs: its base name and cron schedule."""

    base: str
    schedule: str

    def name(self, database: str, cron_database: str) -> str:
        """The job's name for ``database``: the base name in pg_cron's own
        database, ``<base>:<database>`` elsewhere."""
        return self.base if database == cron_database else f"{self.base}:{database}"


CLAIMS_JOB = Job("taskclaim-ttl", "15 * * * *")
_JOB_NAME = CLAIMS_JOB.base
_JOB_SCHEDULE = CLAIMS_JOB.schedule


def _job_command() -> str:
    """The claims job's SQL, exactly as the TypeScript package schedules it."""
    return sqlfiles.read("taskclaim/jobs/command.sql")


def _job_name(database: str, cron_database: str) -> str:
    """The claims job's name for ``database`` (:meth:`Job.name`)."""
    return CLAIMS_JOB.name(database, cron_database)


def cron_database(connection: BaseDatabaseWrapper) -> str | None:
    """The database pg_cron runs jobs from; ``None`` where it is not loaded.
    pg_cron lets only superusers and ``pg_read_all_settings`` read its
    setting: other roles ask ``taskclaim.cron_database()`` (migration 0014),
    which reads it as its owner; before that migration they cannot tell, and
    get ``None`` (check W032 then reports the claims job missing)."""
    with connection.cursor() as cursor:
        cursor.execute(sqlfiles.read("taskclaim/jobs/cron_function.sql"))
        query = _CRON_DATABASE.get(cursor.fetchone()[0])
        if query is None:
            return None
        cursor.execute(query)
        return cursor.fetchone()[0]  # type: ignore[no-any-return]


_CRON_DATABASE = {
    "setting": "SELECT current_setting('cron.database_name', true)",
    "function": "SELECT taskclaim.cron_database()",
}


def _state(connection: BaseDatabaseWrapper) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute(sqlfiles.read("taskclaim/jobs/state.sql"))
        names = [column.name for column in cursor.description]
        state = dict(zip(names, cursor.fetchone(), strict=True))
    return {**state, "cron_database": cron_database(connection)}


def _execute(connection: BaseDatabaseWrapper, path: str, params: dict[str, str]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sqlfiles.read(path), params)


def schedule_job(
    connection: BaseDatabaseWrapper, job: Job, command: str, *, create_extension: bool = False
) -> str | None:
    """Schedules (or reschedules) ``job`` running ``command`` for the
    database of ``connection``; ``None`` once scheduled, else why it was not.
    ``create_extension``: create pg_cron where it runs in this database but
    is not installed, when this role is a superuser."""
    state = _state(connection)
    cron_database, database = state["cron_database"], state["database"]
    if cron_database is None:
        return "pg_cron is not loaded"
    name = job.name(database, cron_database)
    params = {
        "base": job.base,
        "name": name,
        "schedule": job.schedule,
        "command": command,
        "database": database,
    }
    if cron_database == database:
        if not state["installed"]:
            if not (create_extension and state["superuser"]):
                return (
                    "pg_cron is loaded but not installed in this database; "
                    "run CREATE EXTENSION pg_cron as a superuser, then migrate again"
                )
            _execute(connection, "taskclaim/jobs/create_extension.sql", {})
        _execute(connection, "taskclaim/jobs/forget_stale.sql", params)
        _execute(connection, "taskclaim/jobs/schedule.sql", params)
        return None
    try:
        with separate_connection(connection, dbname=cron_database) as conn:
            found = conn.execute("SELECT to_regproc('cron.schedule_in_database')").fetchone()
            if found is None or found[0] is None:
                return (
                    f"pg_cron in database {cron_database} cannot schedule jobs "
                    f"for {database} (no cron.schedule_in_database)"
                )
            conn.execute(sqlfiles.read("taskclaim/jobs/forget_stale.sql"), params)
            conn.execute(sqlfiles.read("taskclaim/jobs/schedule_in_database.sql"), params)
    except psycopg.Error as error:
        return (
            f"pg_cron runs in database {cron_database}, which refused to "
            f"schedule {name} for {database} ({type(error).__name__})"
        )
    return None


def has_job(connection: BaseDatabaseWrapper, job: Job, command: str | None = None) -> bool | None:
    """Whether an active ``job`` serves the database of ``connection`` (with
    ``command``: running that command on the job's schedule, so a job left
    by an older declaration does not count); ``None`` when pg_cron is not
    loaded or its jobs cannot be read from here. Only jobs this user may see
    count (pg_cron shows a user its own jobs; a superuser sees all)."""
    state = _state(connection)
    cron_database, database = state["cron_database"], state["database"]
    if cron_database is None:
        return None
    params = {
        "base": job.base,
        "database": database,
        "command": command,
        "schedule": job.schedule,
    }
    if cron_database == database:
        if not state["installed"]:
            return False
        with connection.cursor() as cursor:
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


def unschedule_job(connection: BaseDatabaseWrapper, job: Job) -> None:
    """Removes ``job`` of the database of ``connection``, under either name,
    wherever pg_cron keeps it; a refusal is logged, never raised."""
    _in_cron_database(connection, "taskclaim/jobs/unschedule.sql", {"base": job.base}, job.base)


def unschedule_others(connection: BaseDatabaseWrapper, prefix: str, keep: list[Job]) -> None:
    """Removes this user's jobs whose base starts with ``prefix`` that serve
    the database of ``connection`` (or a dropped one), but for those of
    ``keep``: the jobs of schedules no longer declared. A refusal is logged,
    never raised."""
    params = {"prefix": prefix, "keep": [job.base for job in keep]}
    _in_cron_database(connection, "taskclaim/jobs/unschedule_others.sql", params, prefix)


def _in_cron_database(
    connection: BaseDatabaseWrapper, path: str, params: dict[str, Any], what: str
) -> None:
    """Runs ``path`` (with ``database`` added to ``params``) wherever pg_cron
    keeps the jobs of the database of ``connection``."""
    state = _state(connection)
    cron_database, database = state["cron_database"], state["database"]
    params = {**params, "database": database}
    if cron_database is None:
        return
    if cron_database == database:
        if state["installed"]:
            with connection.cursor() as cursor:
                cursor.execute(sqlfiles.read(path), params)
        return
    try:
        with separate_connection(connection, dbname=cron_database) as conn:
            if conn.execute("SELECT to_regclass('cron.job') IS NOT NULL").fetchone() == (True,):
                conn.execute(sqlfiles.read(path), params)
    except psycopg.Error as error:
        logger.warning(
            "could not remove job %s from database %s: %s",
            *(what, cron_database, type(error).__name__),
            extra={"event": "taskclaim.cron_job_unschedule_failed"},
        )


def schedule(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Schedules the claims job for the app's database, or skips it with a
    warning and a NOTICE (the migrating client and the server log show it)."""
    reason = schedule_job(
        schema_editor.connection, CLAIMS_JOB, _job_command(), create_extension=True
    )
    if reason is None:
        return
    message = f"{reason}; skipping taskclaim jobs"
    logger.warning(message, extra={"event": "taskclaim.cron_job_skipped"})
    _execute(schema_editor.connection, "taskclaim/jobs/notice.sql", {"message": message})


def unschedule(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Removes the claims job this database's migration scheduled."""
    unschedule_job(schema_editor.connection, CLAIMS_JOB)


def has_cleanup_job(connection: BaseDatabaseWrapper) -> bool | None:
    """Whether an active pg_cron job deletes expired claims (:func:`has_job`)."""
    return has_job(connection, CLAIMS_JOB)
