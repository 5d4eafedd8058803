"""Old task results: the cleanup command and pg_cron's job."""

from __future__ import annotations

from io import StringIO

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings

from astral_taskclaim.db.connections import separate_connection
from astral_taskclaim.tasks_backend import retention
from astral_taskclaim.tasks_backend.compat import TaskResultDoesNotExist

from . import jobs
from .running import drain


def _age(result_id: str, seconds: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE taskclaim.task_result SET finished_at = finished_at - make_interval(secs => %s)"
            " WHERE id = %s",
            [seconds, result_id],
        )


def test_the_command_deletes_results_finished_before_the_retention() -> None:
    old, recent, pending = jobs.add.enqueue(1, 1), jobs.add.enqueue(2, 2), None
    drain()
    pending = jobs.add.enqueue(3, 3)
    _age(old.id, 3600)
    out = StringIO()
    with override_settings(TASKCLAIM_TASK_RESULTS_RETENTION=600):
        call_command("taskclaim_delete_task_results", stdout=out)
    assert "Deleted 1 task results finished over 600 s ago" in out.getvalue()
    with pytest.raises(TaskResultDoesNotExist):
        jobs.add.get_result(old.id)
    assert jobs.add.get_result(recent.id).return_value == 4
    assert not jobs.add.get_result(pending.id).is_finished  # unfinished runs stay


def test_the_command_takes_older_than_and_refuses_a_negative_one() -> None:
    result = jobs.add.enqueue(1, 1)
    drain()
    _age(result.id, 100)
    call_command("taskclaim_delete_task_results", "--older-than", "50", stdout=StringIO())
    with pytest.raises(TaskResultDoesNotExist):
        jobs.add.get_result(result.id)
    with pytest.raises(CommandError, match="older-than"):
        call_command("taskclaim_delete_task_results", "--older-than", "-1")


def test_none_keeps_results_forever() -> None:
    out = StringIO()
    with override_settings(TASKCLAIM_TASK_RESULTS_RETENTION=None):
        call_command("taskclaim_delete_task_results", stdout=out)
    assert "kept" in out.getvalue()


def test_a_bad_retention_setting_is_named() -> None:
    with (
        override_settings(TASKCLAIM_TASK_RESULTS_RETENTION="7d"),
        pytest.raises(CommandError, match="TASKCLAIM_TASK_RESULTS_RETENTION"),
    ):
        call_command("taskclaim_delete_task_results")


def test_the_job_command_calls_the_cleanup_function_with_the_retention() -> None:
    command = retention._job_command(3600)
    assert "taskclaim.delete_task_results(make_interval(secs => 3600))" in command
    with connection.cursor() as cursor:  # and it runs
        cursor.execute(command.split("; ", 1)[1])


def test_schedule_reports_what_it_did() -> None:
    out = StringIO()
    call_command("taskclaim_delete_task_results", "--schedule", stdout=out)
    text = out.getvalue()
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('cron.database_name', true)")
        cron_database = cursor.fetchone()[0]
    if cron_database is None:
        assert "pg_cron is not loaded" in text
    else:
        assert "deletes results finished over 604800 s ago" in text


def _cron_database() -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('cron.database_name', true)")
        return cursor.fetchone()[0]


def _results_jobs(conn: psycopg.Connection) -> dict[str, tuple[str, str]]:
    rows = conn.execute(
        """SELECT jobname, database, command FROM cron.job
           WHERE jobname = 'taskclaim-task-results'
              OR starts_with(jobname, 'taskclaim-task-results:')"""
    ).fetchall()
    return {name: (database, command) for name, database, command in rows}


@pytest.mark.django_db(transaction=True)
def test_migrate_schedules_the_job_with_the_retention_in_force_then() -> None:
    cron_database, database = _cron_database(), connection.settings_dict["NAME"]
    if cron_database in (None, database):
        pytest.skip("needs pg_cron running in another database of this server")
    name = f"taskclaim-task-results:{database}"
    with separate_connection(connection, dbname=cron_database) as conn:
        try:
            with override_settings(TASKCLAIM_TASK_RESULTS_RETENTION=3600):
                call_command("migrate", "astral_taskclaim", verbosity=0)
            assert _results_jobs(conn)[name] == (database, retention._job_command(3600))
            with override_settings(TASKCLAIM_TASK_RESULTS_RETENTION=None):
                call_command("migrate", "astral_taskclaim", verbosity=0)
            assert name not in _results_jobs(conn)
            call_command("migrate", "astral_taskclaim", "0005", verbosity=0)
            call_command("migrate", "astral_taskclaim", verbosity=0)
            assert _results_jobs(conn)[name] == (database, retention._job_command(604800))
            call_command("migrate", "astral_taskclaim", "0005", verbosity=0)
            assert name not in _results_jobs(conn)  # no job left without its table
        finally:
            call_command("migrate", verbosity=0)


@pytest.mark.django_db(transaction=True)
def test_two_app_databases_on_one_server_each_keep_their_results_job() -> None:
    # Another database on the server holds the shared name (a neighbour
    # migrated by an earlier release) and one of its own.
    cron_database, database = _cron_database(), connection.settings_dict["NAME"]
    if cron_database in (None, database):
        pytest.skip("needs pg_cron running in another database of this server")
    other = "taskclaim_results_other"
    with separate_connection(connection, dbname=cron_database) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {other}")
        conn.execute(f"CREATE DATABASE {other}")
        schedule = "SELECT cron.schedule_in_database(%s, '45 * * * *', 'SELECT 1', %s)"
        shared = _results_jobs(conn).get("taskclaim-task-results", (None, None))[0]
        try:
            if shared is None:
                conn.execute(schedule, ["taskclaim-task-results", other])
                shared = other
            conn.execute(schedule, [f"taskclaim-task-results:{other}", other])
            call_command("migrate", "astral_taskclaim", verbosity=0)
            jobs = _results_jobs(conn)
            assert jobs["taskclaim-task-results"][0] == shared
            assert jobs[f"taskclaim-task-results:{other}"][0] == other
            assert jobs[f"taskclaim-task-results:{database}"][0] == database
        finally:
            conn.execute("SELECT cron.unschedule(jobid) FROM cron.job WHERE database = %s", [other])
            conn.execute(f"DROP DATABASE {other}")
