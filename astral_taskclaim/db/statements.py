"""The package's hot SQL, sent as prepared statements on Django's connections.

A claim is one small statement, so how it travels matters as much as what
it does: planning an ``INSERT ... ON CONFLICT`` costs the server more than
running it against a key that is already claimed. :func:`run` sends a
shipped SQL file with server-side parameters through a psycopg cursor that
asks for the statement to be prepared, so a connection parses and plans it
once and afterwards only binds and executes it.

Everything else is Django's: the statement runs on the alias's connection
(so it joins its transaction), raises ``django.db`` exceptions, passes
through ``connection.execute_wrapper()`` hooks and shows in
``connection.queries`` under ``DEBUG``; the connection is opened,
health-checked and shared across threads as for any ORM query. Only
monkeypatches of Django's ``CursorWrapper`` class do not see it unless one
of those two is on: skipping the wrapper is a good part of the speed.

Django turns psycopg's prepared statements off by default (their
``prepare_threshold`` is ``None``) for the sake of transaction-mode
connection poolers. :func:`run` turns them on for its own statements only,
unless the database's settings show such a pooler: ``DISABLE_SERVER_SIDE_CURSORS``
true (what Django's documentation asks for behind PgBouncer in transaction
mode) or an explicit ``OPTIONS["prepare_threshold"] = None``. Then the
statements still bind their parameters on the server, unprepared.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Self, cast

import psycopg
from django.core.signals import setting_changed
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg.abc import Params

from ..conf import app_settings
from ..migrated import explains_missing_tables
from . import sqlfiles

__all__ = ["configured_alias", "may_prepare", "run"]

#: The ``prepare_threshold`` a connection gets when :func:`run` turns
#: preparing on: statements that ask for it (``prepare=True``) are prepared
#: at once, and no other query on the connection ever runs this many times
#: to be prepared automatically, so the application's own queries behave
#: as they did with ``None``.
EXPLICIT_ONLY = 2**62

# Where a Django connection keeps its PreparingCursor between calls.
_CACHED = "_astral_taskclaim_cursor"


class PreparingCursor(psycopg.Cursor[Any]):
    """A server-side-binding cursor whose statements ask to be prepared."""

    def execute(  # type: ignore[override]
        self,
        query: Any,
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> Self:
        """``Cursor.execute`` with ``prepare=True`` unless told otherwise."""
        return super().execute(
            query, params, prepare=True if prepare is None else prepare, binary=binary
        )


@cache
def configured_alias() -> str:
    """``TASKCLAIM_DATABASE``, checked; looked up once, not on every claim,
    and again after ``override_settings`` changes it (or ``DATABASES``)."""
    return app_settings.DATABASE


def _forget_alias(*, setting: str, **kwargs: Any) -> None:
    if setting in {"TASKCLAIM_DATABASE", "DATABASES"}:
        configured_alias.cache_clear()


setting_changed.connect(_forget_alias)


def may_prepare(connection: BaseDatabaseWrapper) -> bool:
    """Whether the settings of ``connection`` allow prepared statements:
    neither ``DISABLE_SERVER_SIDE_CURSORS`` nor an explicit
    ``OPTIONS["prepare_threshold"] = None`` (a transaction-mode pooler)."""
    settings = connection.settings_dict
    if settings.get("DISABLE_SERVER_SIDE_CURSORS"):
        return False
    options = settings.get("OPTIONS") or {}
    return not ("prepare_threshold" in options and options["prepare_threshold"] is None)


def _psycopg_cursor(connection: BaseDatabaseWrapper) -> PreparingCursor:
    """The connection's :class:`PreparingCursor`, kept for its next call.

    Reusing one cursor keeps psycopg's adapters for our parameter and
    result types warm, a sizeable share of a claim's client-side time. A
    connection shared between threads gets a fresh cursor each call, so two
    threads never interleave their results on one cursor.
    """
    raw: psycopg.Connection[Any] = connection.connection
    shared = connection.allow_thread_sharing
    cached = getattr(connection, _CACHED, None)
    if cached is not None and cached.connection is raw and not shared:
        return cached  # type: ignore[no-any-return]
    # A new connection (a reconnect too) starts from Django's None again.
    if raw.prepare_threshold is None and may_prepare(connection):
        raw.prepare_threshold = EXPLICIT_ONLY
    cursor = PreparingCursor(raw)
    if not shared:
        setattr(connection, _CACHED, cursor)
    return cursor


@explains_missing_tables
def run(alias: str, path: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Runs the shipped SQL file ``path`` on database ``alias`` with
    ``params``, prepared where the settings allow; its rows (none for a
    statement without ``RETURNING``).

    The connection is opened and checked as ``connection.cursor()`` does it.
    With an ``execute_wrapper()`` installed or queries logged (``DEBUG``,
    ``CaptureQueriesContext``; then unprepared, so the log has its text)
    the statement goes through Django's cursor wrapper, so those see it;
    otherwise straight to psycopg, errors still raised as ``django.db``'s.
    """
    connection = connections[alias]
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    with connection.wrap_database_errors:
        cursor = _psycopg_cursor(connection)
    query = sqlfiles.read(path)
    if connection.queries_logged:
        # Unprepared, on a cursor of its own: Django 5.2 logs no SQL text
        # for a statement psycopg ran as a prepared one.
        with connection.wrap_database_errors:
            logged = psycopg.Cursor(cursor.connection)
        with connection.make_debug_cursor(cast(Any, logged)) as wrapped:
            wrapped.execute(query, params)
            return wrapped.fetchall() if logged.description else []
    if connection.execute_wrappers:
        # Not closed afterwards (nor below): the psycopg cursor is reused.
        hooked = connection.make_cursor(cast(Any, cursor))
        hooked.execute(query, params)
        return hooked.fetchall() if cursor.description else []
    connection.validate_no_broken_transaction()
    with connection.wrap_database_errors:
        cursor.execute(query, params)
        return cursor.fetchall() if cursor.description else []
