"""Migration operations that run the app's frozen migration SQL, on the claims
database only.

:class:`RunMigrationSQL` runs a file of ``migrations/sql/`` and its reverse
exactly as written (no includes, no formatting), so a released migration
never changes; :class:`ScheduleCleanupJob` schedules pg_cron's claims
cleanup where pg_cron allows it.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import ProjectState

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.db import cron, roles
from astral_taskclaim.db.connections import server_version

# Short names keep Django's four-argument signatures on one line each.
_Editor = BaseDatabaseSchemaEditor
_State = ProjectState


def _migration_sql(name: str) -> str:
    """The text of ``astral_taskclaim/migrations/sql/<name>``, byte for byte."""
    resource = files("astral_taskclaim").joinpath("migrations", "sql", name)
    if "/" in name or not name.endswith(".sql") or not resource.is_file():
        raise FileNotFoundError(f"astral_taskclaim/migrations/sql/{name} is not a migration's SQL")
    return resource.read_text(encoding="utf-8")


class _ClaimsDatabaseOperation(migrations.RunSQL):
    """A migration operation that runs :meth:`forwards` (and :meth:`backwards`
    backwards) on the claims database (``TASKCLAIM_DATABASE``) only, whatever
    the router says about other apps; other databases are left alone.

    Without arguments it has no SQL of its own (a subclass acts in Python).
    """

    def __init__(
        self, sql: str = migrations.RunSQL.noop, reverse_sql: str = migrations.RunSQL.noop
    ) -> None:
        super().__init__(sql=sql, reverse_sql=reverse_sql)

    def deconstruct(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
        return (self.__class__.__qualname__, (), {})

    def forwards(self, schema_editor: BaseDatabaseSchemaEditor) -> None:
        """Applies the operation on the claims database."""
        raise NotImplementedError

    def backwards(self, schema_editor: BaseDatabaseSchemaEditor) -> None:
        """Undoes the operation on the claims database."""
        raise NotImplementedError

    def database_forwards(
        self, app_label: str, schema_editor: _Editor, from_state: _State, to_state: _State
    ) -> None:
        if schema_editor.connection.alias == app_settings.DATABASE:
            self.forwards(schema_editor)

    def database_backwards(
        self, app_label: str, schema_editor: _Editor, from_state: _State, to_state: _State
    ) -> None:
        if schema_editor.connection.alias == app_settings.DATABASE:
            self.backwards(schema_editor)


class RunMigrationSQL(_ClaimsDatabaseOperation):
    """Runs migration SQL file ``forward`` (and ``reverse`` backwards), names
    in ``migrations/sql/``; ``legacy_forward`` replaces ``forward`` on servers
    older than ``legacy_below`` (``server_version_num``).

    With ``TASKCLAIM_ADMIN_ROLE`` set, the SQL runs as that role, so it owns
    what it creates, as if that role ran ``migrate``. Grants to the service
    role are no part of a migration (:mod:`astral_taskclaim.db.grants`).
    """

    def __init__(
        self,
        forward: str,
        *,
        reverse: str,
        legacy_forward: str | None = None,
        legacy_below: int = 0,
    ) -> None:
        self.forward = forward
        self.reverse = reverse
        self.legacy_forward = legacy_forward
        self.legacy_below = legacy_below
        super().__init__(sql=forward, reverse_sql=reverse)

    def deconstruct(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
        kwargs: dict[str, Any] = {"reverse": self.reverse}
        if self.legacy_forward:
            kwargs["legacy_forward"] = self.legacy_forward
            kwargs["legacy_below"] = self.legacy_below
        return (self.__class__.__qualname__, (self.forward,), kwargs)

    def describe(self) -> str:
        return f"Run astral_taskclaim/migrations/sql/{self.forward}"

    def forwards(self, schema_editor: BaseDatabaseSchemaEditor) -> None:
        path = self.forward
        if self.legacy_forward and server_version(schema_editor.connection) < self.legacy_below:
            path = self.legacy_forward
        with roles.acting_as_admin(schema_editor):
            schema_editor.execute(_migration_sql(path), params=None)

    def backwards(self, schema_editor: BaseDatabaseSchemaEditor) -> None:
        with roles.acting_as_admin(schema_editor):
            schema_editor.execute(_migration_sql(self.reverse), params=None)


class ScheduleCleanupJob(_ClaimsDatabaseOperation):
    """Schedules pg_cron job ``taskclaim-ttl``: ``taskclaim.delete_expired()``
    at minute 15 of every hour with a 30 s statement timeout.

    Where pg_cron is not loaded, or cannot run jobs in this database, the
    job is skipped with a NOTICE and the migration still succeeds; the
    ``taskclaim_delete_expired`` command then does the job.
    """

    def describe(self) -> str:
        return "Schedule pg_cron job taskclaim-ttl"

    def forwards(self, schema_editor: BaseDatabaseSchemaEditor) -> None:
        cron.schedule(schema_editor)

    def backwards(self, schema_editor: BaseDatabaseSchemaEditor) -> None:
        cron.unschedule(schema_editor)
