"""The service role's grants (``TASKCLAIM_SERVICE_ROLE``), applied after
every ``migrate`` rather than by the migrations.

A migration runs once, and its SQL is never edited after release; the
service role is a setting, which may be set, or name another role, long
after the tables were made. So the grants are the *current* files of
:data:`_GRANTS` (each beside the SQL of its table's owner), applied by the
``post_migrate`` handler of the app's configuration to the objects of every
applied migration, as the admin role when one is set. ``GRANT`` is
idempotent: running them again grants nothing twice, and a grant added to a
file later reaches existing databases on their next ``migrate``. Grants of a
role the setting no longer names are not revoked (``REVOKE`` them, or
``DROP OWNED BY`` the old role).
"""

from __future__ import annotations

import logging

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.recorder import MigrationRecorder

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.db import roles, sqlfiles

__all__ = ["applied_migrations", "apply_grants"]

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
