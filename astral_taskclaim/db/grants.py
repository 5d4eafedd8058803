"""The service role's grants (``TASKCLAIM_SERVICE_ROLE``), applied after
every ``migrate`` rather than by the migrations.

Released migrations never change, but the setting may be set or changed
later, so the *current* files of :data:`_GRANTS` are applied by the
``post_migrate`` handler (as the admin role, if set). ``GRANT`` is
idempotent; a role no longer named is not revoked. :func:`project_grants`
writes the grants of the project's own tables (``manage.py
taskclaim_grants``).
"""

from __future__ import annotations

import logging

from django.apps import apps
from django.db import router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.recorder import MigrationRecorder

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.db import roles, sqlfiles

logger = logging.getLogger(__name__)

#: The migration creating the objects -> the grants file for them.
_GRANTS = {
    "0001_slug": "slug/grants.sql",
    "0002_taskclaim": "taskclaim/grants.sql",
    "0005_queue": "queue/grants.sql",
    "0006_task_results": "tasks/grants.sql",
    "0007_outbox": "outbox/grants.sql",
    "0010_runs": "runs/grants.sql",
    "0011_schedule": "schedule/grants.sql",
    "0014_cron_database": "taskclaim/cron_grants.sql",
    "0015_follow_up": "taskclaim/follow_up_grants.sql",
}


def applied_migrations(connection: BaseDatabaseWrapper) -> set[str]:
    """Names of the app's migrations applied on ``connection``'s database."""
    recorded = MigrationRecorder(connection).applied_migrations()
    return {name for app, name in recorded if app == "astral_taskclaim"}


def apply_grants(connection: BaseDatabaseWrapper) -> list[str]:
    """Grants the service role what the applied migrations' objects need, in
    one transaction; the grants files applied (none when no role is set)."""
    service = app_settings.SERVICE_ROLE
    if not service:
        return []
    applied = applied_migrations(connection)
    paths = [path for migration, path in _GRANTS.items() if migration in applied]
    if not paths:
        return []
    with (
        connection.schema_editor() as editor,
        roles.acting_as_admin(editor),
        connection.cursor() as cursor,
    ):
        for path in paths:
            statement = sqlfiles.with_roles(path, service_role=service)
            editor.execute(statement.as_string(cursor.connection), params=None)
    logger.info(
        "granted %s what %d migrations' objects need",
        service,
        len(paths),
        extra={"event": "taskclaim.grants_applied"},
    )
    return paths


def _project_tables(connection: BaseDatabaseWrapper) -> list[str]:
    """The tables of the managed models of every installed app but this one
    that ``connection``'s database holds (its router allowing), sorted."""
    return sorted(
        {
            model._meta.db_table
            for model in apps.get_models(include_auto_created=True)
            if model._meta.managed
            and not model._meta.proxy
            and model._meta.app_label != "astral_taskclaim"
            and router.allow_migrate_model(connection.alias, model)
        }
    )


def project_grants(connection: BaseDatabaseWrapper, role: str, *, owner: str | None = None) -> str:
    """The SQL granting ``role`` (the service role) what the project's own
    tables need on ``connection``'s database: ``SELECT, INSERT, UPDATE,
    DELETE`` on each table of :func:`_project_tables` created so far,
    ``USAGE`` on their sequences, and the same by default on the tables and
    sequences ``owner`` (the role that runs ``migrate``; default: the
    connection's user) creates later in the current schema. To be run as
    ``owner``; this app's own objects are granted by ``migrate``."""
    quote = connection.ops.quote_name
    wanted = _project_tables(connection)
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user, current_schema()")
        user, schema = cursor.fetchone()
        present = set(connection.introspection.table_names(cursor))
        tables = [table for table in wanted if table in present]
        sequences = sorted(
            {
                found["name"]
                for table in tables
                for found in connection.introspection.get_sequences(cursor, table)
            }
        )
    owner = owner or user
    grantee, default = quote(role), f"ALTER DEFAULT PRIVILEGES FOR ROLE {quote(owner)}"
    every = "SELECT, INSERT, UPDATE, DELETE"
    lines = [
        f"-- The grants of {role} on this project's tables in schema {schema}, to run "
        f"as {owner}, the role that runs migrate and owns them.",
        f"GRANT USAGE ON SCHEMA {quote(schema)} TO {grantee};",
        *(f"GRANT {every} ON TABLE {quote(table)} TO {grantee};" for table in tables),
        *(f"GRANT USAGE ON SEQUENCE {quote(name)} TO {grantee};" for name in sequences),
        "-- The tables and sequences later migrations create:",
        f"{default} IN SCHEMA {quote(schema)} GRANT {every} ON TABLES TO {grantee};",
        f"{default} IN SCHEMA {quote(schema)} GRANT USAGE ON SEQUENCES TO {grantee};",
    ]
    if missing := [table for table in wanted if table not in present]:
        lines.append(f"-- Not created yet (granted by the defaults): {', '.join(missing)}")
    return "\n".join(lines) + "\n"
