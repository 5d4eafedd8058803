"""``manage.py taskclaim_grants``: the SQL that lets the service role use the
project's own tables, run for real and used as that role."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from io import StringIO

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings
from psycopg import sql

from astral_taskclaim.db.connections import separate_connection

pytestmark = pytest.mark.django_db(transaction=True)


def execute(statement: str | sql.Composable) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement)


@pytest.fixture
def service_role() -> Iterator[str]:
    """A login role that was given nothing."""
    role = f"taskclaim_service_{uuid.uuid4().hex[:12]}"
    execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    yield role
    execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
    execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def grants(**options: object) -> str:
    out = StringIO()
    call_command("taskclaim_grants", stdout=out, **options)
    return out.getvalue()


def test_the_printed_grants_let_the_service_role_use_the_projects_tables(
    service_role: str,
) -> None:
    insert = "INSERT INTO testapp_outbox (body) VALUES ('{}') RETURNING id"
    with separate_connection(connection, user=service_role, password="") as service:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="testapp_outbox"):
            service.execute(insert)
        with override_settings(TASKCLAIM_SERVICE_ROLE=service_role):
            printed = grants()
        execute(printed)  # as the tables' owner, the user that ran migrate
        [(pk,)] = service.execute(insert).fetchall()
        service.execute("UPDATE testapp_outbox SET body = '[1]' WHERE id = %s", [pk])
        row = service.execute("SELECT body FROM testapp_outbox WHERE id = %s", [pk]).fetchone()
        assert row == ([1],)
        assert service.execute("DELETE FROM testapp_outbox WHERE id = %s", [pk]).rowcount == 1
        service.execute("SELECT count(*) FROM django_content_type, auth_user_groups")
        # A table (with a serial's sequence) that a later migration creates.
        execute("CREATE TABLE testapp_later (id serial PRIMARY KEY, n int)")
        try:
            service.execute("INSERT INTO testapp_later (n) VALUES (1)")
            assert service.execute("SELECT id, n FROM testapp_later").fetchall() == [(1, 1)]
        finally:
            execute("DROP TABLE testapp_later")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            service.execute("TRUNCATE testapp_outbox")
    assert f'GRANT USAGE ON SEQUENCE "testapp_outbox_id_seq" TO "{service_role}";' in printed
    assert "taskclaim" not in printed.replace(service_role, "")  # migrate grants the app's own


def test_role_and_owner_given_on_the_command_line() -> None:
    printed = grants(role="postgres", owner="postgres")
    assert 'ON TABLE "testapp_room" TO "postgres";' in printed
    assert 'ALTER DEFAULT PRIVILEGES FOR ROLE "postgres" IN SCHEMA "public"' in printed


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "No role to grant: pass --role or set TASKCLAIM_SERVICE_ROLE."),
        ({"role": "taskclaim_nobody"}, "--role names role 'taskclaim_nobody', which does not"),
        (
            {"role": "postgres", "owner": "taskclaim_nobody"},
            "--owner names role 'taskclaim_nobody', which does not",
        ),
        ({"role": "postgres", "database": "nowhere"}, "--database: unknown database alias"),
    ],
)
def test_a_role_it_cannot_grant_is_refused_naming_it(options: dict[str, str], message: str) -> None:
    with pytest.raises(CommandError, match=message.replace("(", r"\(")):
        grants(**options)
