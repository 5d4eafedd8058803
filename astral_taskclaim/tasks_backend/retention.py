"""Deleting finished Django Task results older than
``TASKCLAIM_TASK_RESULTS_RETENTION``, by command or by pg_cron.

:func:`delete_old_results` is what ``manage.py taskclaim_delete_task_results``
runs. Where pg_cron is loaded, job ``taskclaim-task-results`` (minute 45 of
every hour) is scheduled after every ``migrate`` (the app's ``post_migrate``
handler), not by a migration: the retention is a setting, so each
``migrate``, or ``taskclaim_delete_task_results --schedule``, schedules it
with the retention in force then. It is named per database as the claims
job is (:mod:`astral_taskclaim.db.cron`, which schedules both): two app
databases on one server each keep their own. Where pg_cron is not loaded or
refuses, the job is skipped and the command does the work.
"""

from __future__ import annotations

import logging

from django.db.backends.base.base import BaseDatabaseWrapper

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.db import cron

logger = logging.getLogger(__name__)

JOB = cron.Job("taskclaim-task-results", "45 * * * *")
_JOB_NAME = JOB.base


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


def _job_command(retention: int) -> str:
    """The job's SQL for a retention of ``retention`` seconds."""
    return (
        "SET statement_timeout = '60s'; "
        f"SELECT taskclaim.delete_task_results(make_interval(secs => {int(retention)}));"
    )


def schedule_job(connection: BaseDatabaseWrapper, *, quiet: bool = False) -> str:
    """Schedules (or reschedules) the job for the app's database with the
    current retention, or removes it when results are kept forever; what
    was done, for the caller to show. A job skipped is logged as a warning,
    or at INFO with ``quiet`` when pg_cron is not loaded at all (every
    ``migrate`` on such a server would warn again)."""
    retention = app_settings.TASK_RESULTS_RETENTION
    if retention is None:
        cron.unschedule_job(connection, JOB)
        return f"pg_cron job {_JOB_NAME} removed: results are kept forever"
    reason = cron.schedule_job(connection, JOB, _job_command(retention))
    if reason is None:
        return f"pg_cron job {_JOB_NAME} deletes results finished over {retention} s ago"
    text = f"{reason}; pg_cron job {_JOB_NAME} skipped: run taskclaim_delete_task_results instead"
    level = logging.INFO if quiet and reason == "pg_cron is not loaded" else logging.WARNING
    logger.log(level, text, extra={"event": "tasks.cron_job_skipped"})
    return text


def unschedule_job(connection: BaseDatabaseWrapper) -> None:
    """Removes the job of the app's database, where pg_cron has it."""
    cron.unschedule_job(connection, JOB)
