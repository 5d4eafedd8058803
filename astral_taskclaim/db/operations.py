"""Migration operations that run the app's packaged SQL.

:class:`RunPackageSQL` is a :class:`~django.db.migrations.RunSQL` whose SQL
comes from the packaged SQL files (:mod:`.sqlfiles`) when the migration runs (not when it is
imported), so the ``TASKCLAIM_*_ROLE`` settings and the server version are
taken into account. :class:`ScheduleCleanupJob` schedules pg_cron's
``taskclaim-ttl`` job where pg_cron allows it. Both act on the claims
database only, as every :class:`ClaimsDatabaseOperation` does.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import ProjectState

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.db import cron, roles, sqlfiles

# Short names keep Django's four-argument signatures on one line each.
_Editor = BaseDatabaseSchemaEditor
_State = ProjectState


class ClaimsDatabaseOperation(migrations.RunSQL):
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


class RunPackageSQL(ClaimsDatabaseOperation):
    """Runs ``forward`` (and ``reverse`` backwards) from the packaged SQL.

    With ``TASKCLAIM_ADMIN_ROLE`` set, the SQL runs as that role, so it owns
    what it creates; with ``TASKCLAIM_SERVICE_ROLE`` set, ``grants`` then
    gives the service role what it needs. ``legacy_forward`` replaces
    ``forward`` on servers older than ``legacy_below`` (``server_version_num``).
    """

    def __init__(
        self,
        forward: str,
        *,
        reverse: str,
        grants: str | None = None,
        legacy_forward: str | None = None,
        legacy_below: int = 0,
    ) -> None:
        self.forward = forward
        self.reverse = reverse
        self.grants = grants
        self.legacy_forward = legacy_forward
        self.legacy_below = legacy_below
        super().__init__(sql=forward, reverse_sql=reverse)

    def deconstruct(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
        kwargs: dict[str, Any] = {"reverse": self.reverse}
        if self.grants:
            kwargs["grants"] = self.grants
        if self.legacy_forward:
            kwargs["legacy_forward"] = self.legacy_forward
            kwargs["legacy_below"] = self.legacy_below
        return (self.__class__.__qualname__, (self.forward,), kwargs)

    def describe(self) -> str:
        return f"Run astral_taskclaim/{sqlfiles.package_path(self.forward)}"

    def forwards(self, schema_editor: BaseDatabaseSchemaEditor) -> None:
        connection = schema_editor.connection
        path = self.forward
        if self.legacy_forward and connection.pg_version < self.legacy_below:  # type: ignore[attr-defined]
            path = self.legacy_forward
        service = app_settings.SERVICE_ROLE
        with roles.acting_as_admin(schema_editor):
            schema_editor.execute(sqlfiles.read(path), params=None)
            if self.grants and service:
                with connection.cursor() as cursor:
                    grants = sqlfiles.with_roles(self.grants, service_role=service)
                    schema_editor.execute(grants.as_string(cursor.connection), params=None)

    def backwards(self, schema_editor: BaseDatabaseSchemaEditor) -> None:
        with roles.acting_as_admin(schema_editor):
            schema_editor.execute(sqlfiles.read(self.reverse), params=None)


class ScheduleCleanupJob(ClaimsDatabaseOperation):
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
