"""How the package runs its SQL: one :class:`Connector` per database alias.

Every run-time statement is a shipped SQL file run over Django's connection
for the alias, so it joins the transaction, raises ``django.db`` exceptions,
passes through ``execute_wrapper()`` hooks and shows in ``connection.queries``.

Hot statements (``prepare=True``) are sent prepared, from the innermost
``execute_wrapper()`` to a server-binding psycopg cursor on the same
connection: planning a claim costs more than running it, and Django's own
cursor ran 0.17x to 0.95x the connector's rate (benchmark row 13).
tests/db/test_statements.py holds this path to what Django's cursor does.
While Django logs queries they run unprepared, so the log has their text;
behind a transaction-mode pooler (``DISABLE_SERVER_SIDE_CURSORS``,
``OPTIONS["prepare_threshold"] = None``, or one detected by
:func:`~astral_taskclaim.db.connections.pooled`) nothing is prepared.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, ParamSpec, TypeVar

import psycopg
from django.core.exceptions import SynchronousOnlyOperation
from django.core.signals import setting_changed
from django.db import DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.not_migrated import explains_missing_tables
from astral_taskclaim.db import sqlfiles
from astral_taskclaim.db.connections import drop_if_read_only, known_pooler, pooled

#: What a sync call on the event loop says, in place of Django's advice
#: (``sync_to_async``, one thread for every request's claim).
ON_EVENT_LOOP = (
    "astral_taskclaim's synchronous API was called from async code (an async view?): await "
    "its async twin instead, aenqueue_claimed() for enqueue_claimed() or a claimed task's "
    ".enqueue(), a Django Task's aenqueue() for enqueue(), aclaim_task() for claim_task(); "
    "they run on the event loop without a thread"
)


P = ParamSpec("P")
R = TypeVar("R")


def _explains_event_loop(function: Callable[P, R]) -> Callable[P, R]:
    """Decorates a function running the app's SQL: Django's
    ``SynchronousOnlyOperation`` (a blocking connection used on an event
    loop) is raised again naming the async functions to call instead."""

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except SynchronousOnlyOperation as error:
            raise SynchronousOnlyOperation(ON_EVENT_LOOP) from error

    return wrapper


#: The ``prepare_threshold`` a connection gets when the connector turns
#: preparing on: statements that ask for it (``prepare=True``) are prepared
#: at once, and no other query on the connection ever runs this many times
#: to be prepared automatically, so the application's own queries behave
#: as they did with ``None``.
EXPLICIT_ONLY = 2**62

Rows = list[tuple[Any, ...]]


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


class _PreparingCursors(threading.local):
    """Per thread, one server-binding psycopg cursor per database alias.

    Reusing a cursor keeps psycopg's adapters for our parameter and result
    types warm, a sizeable share of a claim's client-side time. Per thread,
    so two threads sharing a connection never interleave results on one
    cursor. A cursor of a connection since closed is replaced on next use.
    """

    def __init__(self) -> None:
        self.by_alias: dict[str, psycopg.Cursor[Any]] = {}

    def get(self, database: BaseDatabaseWrapper) -> psycopg.Cursor[Any]:
        connection: psycopg.Connection[Any] = database.connection
        cursor = self.by_alias.get(database.alias)
        if cursor is None or cursor.connection is not connection:
            # A new connection (a reconnect too) starts from Django's None.
            if connection.prepare_threshold is None:
                connection.prepare_threshold = EXPLICIT_ONLY
            cursor = self.by_alias[database.alias] = psycopg.Cursor(connection)
        return cursor


_cursors = _PreparingCursors()


class _Prepared:
    """The innermost ``execute_wrapper()`` of one prepared statement: runs
    it on the connection's server-binding cursor and keeps its result."""

    def __init__(self) -> None:
        self.rows: Rows = []
        self.rowcount = -1

    def __call__(
        self,
        execute: Callable[..., Any],
        sql: str,
        params: Any,
        many: bool,
        context: dict[str, Any],
    ) -> None:
        self.run(context["connection"], sql, params)

    def run(self, database: BaseDatabaseWrapper, sql: str, params: Any) -> None:
        """Runs ``sql`` prepared on ``database``'s connection."""
        # What Django's cursor checks and wraps around every query it runs.
        database.validate_no_broken_transaction()
        with database.wrap_database_errors:
            cursor = _cursors.get(database)
            cursor.execute(sql, params, prepare=True)
            self.rows = cursor.fetchall() if cursor.description else []
            self.rowcount = cursor.rowcount


class Connector:
    """Runs shipped SQL files on the Django database ``alias``."""

    def __init__(self, alias: str) -> None:
        self.alias = alias

    def __repr__(self) -> str:
        return f"<Connector {self.alias!r}>"

    @property
    def connection(self) -> BaseDatabaseWrapper:
        """Django's connection for ``alias`` in this thread."""
        return connections[self.alias]

    def fetch(
        self, path: str, params: Mapping[str, Any] | None = None, *, prepare: bool = False
    ) -> Rows:
        """The rows of the SQL file ``path`` run with ``params`` (none for a
        statement without ``RETURNING``); prepared with ``prepare=True``
        where the settings allow."""
        return self._run(path, params, prepare=prepare)[0]

    def execute(self, path: str, params: Mapping[str, Any] | None = None) -> int:
        """Runs the SQL file ``path`` with ``params``; how many rows it changed."""
        return self._run(path, params, prepare=False)[1]

    def _prepares(self, connection: BaseDatabaseWrapper) -> bool:
        if not may_prepare(connection) or connection.queries_logged:
            return False
        relayed = known_pooler(self.alias)
        if relayed is None:
            connection.validate_no_broken_transaction()
            connection.ensure_connection()
            with connection.wrap_database_errors:
                relayed = pooled(self.alias, connection.connection)
        return not relayed

    @explains_missing_tables
    @_explains_event_loop
    def _run(
        self, path: str, params: Mapping[str, Any] | None, *, prepare: bool
    ) -> tuple[Rows, int]:
        connection = self.connection
        try:
            return self._run_on(connection, sqlfiles.read(path), params, prepare=prepare)
        except DatabaseError as error:
            drop_if_read_only(connection, error)
            raise

    def _run_on(
        self,
        connection: BaseDatabaseWrapper,
        query: str,
        params: Mapping[str, Any] | None,
        *,
        prepare: bool,
    ) -> tuple[Rows, int]:
        # Django's query log (DEBUG, CaptureQueriesContext) cannot show the
        # text of a statement psycopg ran prepared: logged, it runs as is.
        if not (prepare and self._prepares(connection)):
            with connection.cursor() as cursor:
                cursor.execute(query, params)
                return (cursor.fetchall() if cursor.description else []), cursor.rowcount
        prepared = _Prepared()
        if connection.execute_wrappers:
            with connection.cursor() as cursor, connection.execute_wrapper(prepared):
                cursor.execute(query, params)
        else:
            # Nobody to pass the statement through: skip making a Django
            # cursor it would not use, a good part of a claim's client-side
            # time, and open and check the connection as cursor() does.
            connection.close_if_health_check_failed()
            connection.ensure_connection()
            connection.validate_thread_sharing()
            prepared.run(connection, query, params)
        return prepared.rows, prepared.rowcount


def run(alias: str, path: str, params: Mapping[str, Any]) -> Rows:
    """The rows of the hot SQL file ``path`` run on database ``alias`` with
    ``params``, prepared where the settings allow."""
    return Connector(alias).fetch(path, params, prepare=True)
