"""The service role's grants follow the setting: applied after every
``migrate``, whatever migrations ran (astral_taskclaim.db.grants)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.db import ProgrammingError, connection, transaction
from django.test import override_settings
from psycopg import sql

from astral_taskclaim import checks
from astral_taskclaim.db import cron
from astral_taskclaim.db.grants import _GRANTS, applied_migrations
from astral_taskclaim.schedules.upkeep import cron_loaded
from tests.claimkit import set_role

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def new_role() -> Iterator[str]:
    """A role that did not exist when the test database was migrated."""
    role = f"taskclaim_grants_{uuid.uuid4().hex[:12]}"
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))
    yield role
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        cursor.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _privileges(role: str) -> list[tuple[object, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT has_table_privilege(%(role)s, 'taskclaim.claim', 'INSERT'),
                      has_table_privilege(%(role)s, 'taskclaim.message', 'UPDATE'),
                      has_table_privilege(%(role)s, 'taskclaim.task_result', 'DELETE'),
                      has_table_privilege(%(role)s, 'taskclaim.outbox', 'SELECT'),
                      has_schema_privilege(%(role)s, 'slug', 'USAGE'),
                      has_table_privilege(%(role)s, 'taskclaim.claim', 'TRUNCATE')""",
            {"role": role},
        )
        return cursor.fetchall()


def test_a_service_role_set_after_the_tables_were_made_is_granted_by_migrate(
    new_role: str,
) -> None:
    assert _privileges(new_role) == [(False, False, False, False, False, False)]
    with override_settings(TASKCLAIM_SERVICE_ROLE=new_role):
        call_command("migrate", "astral_taskclaim", verbosity=0)  # nothing left to migrate
    assert _privileges(new_role) == [(True, True, True, True, True, False)]


def test_every_grants_file_names_an_applied_migration() -> None:
    assert set(_GRANTS) <= applied_migrations(connection)


def test_a_service_role_finds_pg_cron_without_reading_its_setting(new_role: str) -> None:
    """pg_cron lets only superusers and ``pg_read_all_settings`` read
    ``cron.database_name``: the service role asks taskclaim.cron_database()."""
    loaded = cron.cron_database(connection)  # as the suite's superuser
    if loaded is None:
        pytest.skip("needs pg_cron loaded on the server")
    with override_settings(TASKCLAIM_SERVICE_ROLE=new_role):
        call_command("migrate", "astral_taskclaim", verbosity=0)
    set_role(new_role)
    try:
        with (
            pytest.raises(ProgrammingError, match="pg_read_all_settings"),
            connection.cursor() as cursor,
        ):
            cursor.execute("SELECT current_setting('cron.database_name', true)")
        assert cron.cron_database(connection) == loaded
        assert cron_loaded(connection.alias) is True
        assert cron.has_cleanup_job(connection) is not None  # the migration's state query
        messages = checks.check_server(databases=[connection.alias])
        assert not [m for m in messages if m.id == "astral_taskclaim.W007"]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET ROLE")
    with transaction.atomic(), connection.cursor() as cursor:  # before migration 0014
        cursor.execute("DROP FUNCTION taskclaim.cron_database()")
        set_role(new_role)
        assert cron.cron_database(connection) is None  # cannot tell, rather than fail
        transaction.set_rollback(True)  # the function and the role come back
    assert cron.cron_database(connection) == loaded
