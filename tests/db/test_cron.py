"""astral_taskclaim.db.cron where pg_cron runs in the app's own database.

The suite's database is never pg_cron's (``cron.database_name`` names one
database per server, and the test database is created afresh), so the
migrations in the suite take the other-database path (tests/test_migrations.py).
This test takes the same-database path in pg_cron's database itself, inside
a transaction it rolls back: the jobs table is left as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from astral_taskclaim.db import cron

pytestmark = pytest.mark.django_db


def _cron_database() -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('cron.database_name', true)")
        row = cursor.fetchone()
    return None if row is None else row[0]


@pytest.fixture
def in_cron_database() -> Iterator[BaseDatabaseWrapper]:
    """A Django connection to pg_cron's database, in a transaction that is
    rolled back at the end."""
    name = _cron_database()
    if name is None or name == connection.settings_dict["NAME"]:
        pytest.skip("needs pg_cron running in another database of this server")
    # A connection outside ``connections``: the test's own stays as it is.
    wrapper_class: Any = type(connections[connection.alias])
    other: BaseDatabaseWrapper = wrapper_class(
        {**connection.settings_dict, "NAME": name}, alias="taskclaim_cron_test"
    )
    other.connect()
    other.set_autocommit(False)
    try:
        with other.cursor() as cursor:
            # This session sees only its own job of that name.
            cursor.execute("DELETE FROM cron.job WHERE jobname = %s", [cron._JOB_NAME])
        yield other
    finally:
        other.rollback()
        other.close()


def _jobs(conn: BaseDatabaseWrapper) -> list[tuple[Any, ...]]:
    with conn.cursor() as cursor:
        cursor.execute(
            "SELECT schedule, command, database FROM cron.job WHERE jobname = %s",
            [cron._JOB_NAME],
        )
        return cursor.fetchall()


def test_the_job_is_scheduled_and_removed_in_the_same_database(
    in_cron_database: BaseDatabaseWrapper,
) -> None:
    name = in_cron_database.settings_dict["NAME"]
    with in_cron_database.schema_editor(atomic=False) as editor:
        cron.schedule(editor)
        assert _jobs(in_cron_database) == [(cron._JOB_SCHEDULE, cron._job_command(), name)]
        cron.schedule(editor)  # again (a re-run migration): still one job
        assert len(_jobs(in_cron_database)) == 1
        cron.unschedule(editor)
        assert _jobs(in_cron_database) == []


def test_jobs_of_a_prefix_not_kept_are_removed_in_the_same_database(
    in_cron_database: BaseDatabaseWrapper,
) -> None:
    keep, gone = (
        cron.Job("taskclaim-test-keep", "0 * * * *"),
        cron.Job("taskclaim-test-gone", "0 * * * *"),
    )
    other = cron.Job("taskclaim-other", "0 * * * *")
    for job in (keep, gone, other):
        assert cron.schedule_job(in_cron_database, job, "SELECT 1") is None

    def names() -> set[str]:
        with in_cron_database.cursor() as cursor:
            cursor.execute("SELECT jobname FROM cron.job WHERE jobname LIKE 'taskclaim-%%'")
            return {row[0] for row in cursor.fetchall()} - {cron._JOB_NAME}

    assert names() >= {keep.base, gone.base, other.base}
    cron.unschedule_others(in_cron_database, "taskclaim-test-", [keep])
    found = names()
    assert keep.base in found
    assert other.base in found
    assert gone.base not in found
