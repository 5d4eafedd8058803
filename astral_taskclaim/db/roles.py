"""The optional admin and service roles (``TASKCLAIM_ADMIN_ROLE``,
``TASKCLAIM_SERVICE_ROLE``) and acting as the admin role in migrations."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.core.exceptions import ImproperlyConfigured
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from psycopg import sql

from astral_taskclaim.core.conf import app_settings


def _configured_roles() -> dict[str, str]:
    """The configured roles by setting name, unset ones left out."""
    found = {
        "TASKCLAIM_ADMIN_ROLE": app_settings.ADMIN_ROLE,
        "TASKCLAIM_SERVICE_ROLE": app_settings.SERVICE_ROLE,
    }
    return {setting: role for setting, role in found.items() if role}


def existing_roles(connection: BaseDatabaseWrapper, names: list[str]) -> set[str]:
    """Those of ``names`` that are roles of ``connection``'s server."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)", [names])
        return {row[0] for row in cursor.fetchall()}


def missing_roles(connection: BaseDatabaseWrapper) -> dict[str, str]:
    """The configured roles the server does not have, by setting name."""
    wanted = _configured_roles()
    if not wanted:
        return {}
    present = existing_roles(connection, list(wanted.values()))
    return {setting: role for setting, role in wanted.items() if role not in present}


def how_to_create(setting: str, role: str) -> str:
    """A sentence naming a missing role and the SQL that creates it."""
    quoted = '"' + role.replace('"', '""') + '"'
    if setting == "TASKCLAIM_ADMIN_ROLE":
        create = (
            f"CREATE ROLE {quoted} NOLOGIN; GRANT {quoted} TO <migrating user>; "
            f"GRANT CREATE ON DATABASE <database> TO {quoted};"
        )
    else:
        create = f"CREATE ROLE {quoted} LOGIN PASSWORD '...';"
    return f"{setting} names role {role!r}, which does not exist; create it with: {create}"


def _require_roles(connection: BaseDatabaseWrapper) -> None:
    """Raises :class:`ImproperlyConfigured` naming the first missing role."""
    for setting, role in missing_roles(connection).items():
        raise ImproperlyConfigured(how_to_create(setting, role))


@contextmanager
def acting_as_admin(schema_editor: BaseDatabaseSchemaEditor) -> Iterator[None]:
    """Runs the block as ``TASKCLAIM_ADMIN_ROLE`` (when set), so the objects it
    creates belong to that role; checks the configured roles exist first."""
    connection = schema_editor.connection
    _require_roles(connection)
    admin = app_settings.ADMIN_ROLE
    if not admin:
        yield
        return
    with connection.cursor() as cursor:
        statement = sql.SQL("SET ROLE {}").format(sql.Identifier(admin))
        schema_editor.execute(statement.as_string(cursor.connection), params=None)
    try:
        yield
    finally:
        schema_editor.execute("RESET ROLE", params=None)
