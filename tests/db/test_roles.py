"""TASKCLAIM_ADMIN_ROLE / TASKCLAIM_SERVICE_ROLE: ownership, grants, least privilege."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from astral_taskclaim.db.connections import separate_connection

pytestmark = pytest.mark.django_db(transaction=True)

ADMIN = "taskclaim_test_admin"
SERVICE = "taskclaim_test_service"


def execute(query: str, params: list[object] | None = None) -> list[tuple[object, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(query, params)
        return cursor.fetchall() if cursor.description else []


@pytest.fixture
def roles() -> Iterator[None]:
    """Both roles exist; the admin may create schemas in the test database."""
    database = connection.settings_dict["NAME"]
    for role, login in ((ADMIN, "NOLOGIN"), (SERVICE, "LOGIN")):
        if not execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]):
            execute(f"CREATE ROLE {role} {login}")
    execute(f'GRANT CREATE ON DATABASE "{database}" TO {ADMIN}')
    call_command("migrate", "astral_taskclaim", "zero", verbosity=0)
    try:
        with override_settings(TASKCLAIM_ADMIN_ROLE=ADMIN, TASKCLAIM_SERVICE_ROLE=SERVICE):
            call_command("migrate", "astral_taskclaim", verbosity=0)
            yield
            call_command("migrate", "astral_taskclaim", "zero", verbosity=0)
    finally:
        call_command("migrate", verbosity=0)  # dependent apps too
        execute(f'REVOKE CREATE ON DATABASE "{database}" FROM {ADMIN}')


@pytest.fixture
def service() -> Iterator[psycopg.Connection]:
    """A connection to the test database as the service role."""
    with separate_connection(connection, user=SERVICE, password="") as conn:
        yield conn


def test_objects_belong_to_the_admin_role(roles: None) -> None:
    owners = execute(
        """SELECT nspname, pg_get_userbyid(nspowner) FROM pg_namespace
           WHERE nspname IN ('slug', 'taskclaim') ORDER BY 1"""
    )
    assert owners == [("slug", ADMIN), ("taskclaim", ADMIN)]
    table_owner = execute("SELECT tableowner FROM pg_tables WHERE tablename = 'claim'")
    assert table_owner == [(ADMIN,)]


def test_service_role_claims_and_deletes_its_claims(
    roles: None, service: psycopg.Connection
) -> None:
    service.execute(
        "INSERT INTO taskclaim.claim VALUES ('k', now() + interval '1 minute', gen_random_uuid())"
    )
    service.execute("UPDATE taskclaim.claim SET expires_at = now() WHERE key = 'k'")
    assert service.execute("SELECT slug.slug('Room 52')").fetchone() == ("room-52",)
    assert service.execute("DELETE FROM taskclaim.claim WHERE key = 'k'").rowcount == 1


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT taskclaim.delete_expired()",
        "TRUNCATE taskclaim.claim",
        "ALTER TABLE taskclaim.claim ADD COLUMN extra int",
        "DROP TABLE taskclaim.claim",
        "CREATE TABLE taskclaim.other (id int)",
    ],
)
def test_service_role_cannot(roles: None, service: psycopg.Connection, statement: str) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        service.execute(statement)


@pytest.mark.parametrize(
    ("setting", "role"),
    [
        ("TASKCLAIM_SERVICE_ROLE", "taskclaim_no_such_service"),
        ("TASKCLAIM_ADMIN_ROLE", "taskclaim_no_such_admin"),
    ],
)
def test_a_missing_role_fails_the_migration_naming_it(setting: str, role: str) -> None:
    call_command("migrate", "astral_taskclaim", "zero", verbosity=0)
    try:
        with (
            override_settings(**{setting: role}),
            pytest.raises(
                ImproperlyConfigured, match=rf"{setting} names role '{role}'.*CREATE ROLE"
            ),
        ):
            call_command("migrate", "astral_taskclaim", verbosity=0)
        assert execute("SELECT to_regnamespace('slug')") == [(None,)]
    finally:
        call_command("migrate", verbosity=0)
