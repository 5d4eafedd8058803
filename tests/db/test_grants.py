"""The service role's grants follow the setting: applied after every
``migrate``, whatever migrations ran (astral_taskclaim.db.grants)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from psycopg import sql

from astral_taskclaim.db.grants import _GRANTS, applied_migrations

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
