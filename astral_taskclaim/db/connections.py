"""Separate psycopg connections made like a Django database's, and what they
need: the server's version, dropping this thread's Django connections after a
database error, a savepoint around a statement that may fail, and whether a
pooler relays an alias.

LISTEN, pg_cron's other database and the async functions cannot share
Django's connection. A transaction-mode pooler breaks prepared statements
and LISTEN; it answers start-up with a process id of its own, so a
connection whose ``pg_backend_pid()`` differs from it is relayed (asked once
per alias and process). After a failover a connection may sit on a standby
and fail every write while looking healthy: :func:`drop_if_read_only`
closes it, so the next one finds the primary.
"""

from __future__ import annotations

import logging
import threading
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import psycopg
from django.core.signals import setting_changed
from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

logger = logging.getLogger(__name__)

#: What a connection asks to learn whether a pooler relays it.
PROBE = "SELECT pg_backend_pid()"

_pooled: dict[str, bool] = {}  # database alias -> a pooler is in between
_pooled_lock = threading.Lock()

# Keys of Django's connection parameters that psycopg.connect() does not take.
_DJANGO_ONLY = ("cursor_factory", "context", "prepare_threshold", "server_side_binding")


def connection_params(database: str | BaseDatabaseWrapper, **overrides: Any) -> dict[str, Any]:
    """The keyword arguments of ``psycopg.connect()`` (or
    ``psycopg.AsyncConnection.connect()``) that Django uses for ``database``
    (an alias or a connection), with ``overrides`` applied."""
    wrapper = connections[database] if isinstance(database, str) else database
    params = wrapper.get_connection_params()
    for name in _DJANGO_ONLY:
        params.pop(name, None)
    params.update(overrides)
    return params


def separate_connection(
    database: str | BaseDatabaseWrapper, *, autocommit: bool = True, **overrides: Any
) -> psycopg.Connection[Any]:
    """A new psycopg connection made like Django's for ``database`` (an alias
    or a connection), with ``overrides`` (e.g. ``dbname``, ``user``) applied.
    The caller closes it."""
    return psycopg.connect(**connection_params(database, **overrides), autocommit=autocommit)


def server_version(connection: BaseDatabaseWrapper) -> int:
    """The server's ``server_version_num`` (e.g. 150004), read from the
    driver's connection info: no query, and no private attribute of Django's."""
    with connection.cursor() as cursor:
        return int(cursor.connection.info.server_version)


def close_connections() -> None:
    """Closes every Django connection of this thread, so the next query
    opens a fresh one; a connection that fails to close (a broken one may)
    is logged at DEBUG and dropped all the same."""
    for alias in connections:
        try:
            connections[alias].close()
        except Exception:
            logger.debug("closing connection %s failed", alias, exc_info=True)


def savepoint_if_in_atomic(alias: str) -> AbstractContextManager[object]:
    """A savepoint on ``alias`` inside an atomic block, so a statement that
    fails leaves the caller's transaction usable; nothing in autocommit,
    where the statement is a transaction of its own."""
    if connections[alias].in_atomic_block:
        return transaction.atomic(using=alias)
    return nullcontext()


def known_pooler(alias: str) -> bool | None:
    """Whether a pooler relays ``alias``'s connections, if a connection has
    been asked (:func:`pooled`, :func:`apooled`) in this process."""
    return _pooled.get(alias)


def pooled(alias: str, connection: psycopg.Connection[Any]) -> bool:
    """Whether a pooler relays ``connection`` (of database ``alias``),
    asked only if no connection of ``alias`` was asked before."""
    verdict = _pooled.get(alias)
    if verdict is None:
        row = connection.execute(PROBE).fetchone()
        verdict = _record(alias, connection, row[0] if row else None)
    return verdict


async def apooled(alias: str, connection: psycopg.AsyncConnection[Any]) -> bool:
    """:func:`pooled` for an async connection."""
    verdict = _pooled.get(alias)
    if verdict is None:
        row = await (await connection.execute(PROBE)).fetchone()
        verdict = _record(alias, connection, row[0] if row else None)
    return verdict


def _record(
    alias: str,
    connection: psycopg.Connection[Any] | psycopg.AsyncConnection[Any],
    server_pid: int | None,
) -> bool:
    with _pooled_lock:
        first = alias not in _pooled
        verdict = _pooled.setdefault(alias, server_pid != connection.info.backend_pid)
    if verdict and first:
        logger.info(
            "database %s: a connection pooler relays its connections; prepared statements "
            "and LISTEN are off for it (the PostgreSQL queues poll)",
            alias,
            extra={"event": "db.pooler_detected", "database": alias},
        )
    return verdict


def _forget_poolers(*, setting: str, **kwargs: Any) -> None:
    if setting == "DATABASES":
        with _pooled_lock:
            _pooled.clear()


setting_changed.connect(_forget_poolers)


def _is_read_only_error(error: BaseException) -> bool:
    """Whether ``error`` (psycopg's or Django's wrapping it) is a write
    refused because the server is read-only (a standby)."""
    return isinstance(error, psycopg.errors.ReadOnlySqlTransaction) or isinstance(
        error.__cause__, psycopg.errors.ReadOnlySqlTransaction
    )


def log_read_only(alias: str) -> None:
    """The one log line of a connection replaced for being on a standby."""
    logger.warning(
        "database %s: the connection is to a read-only server (a standby, after a "
        "failover?); closing it so the next connection finds the primary",
        alias,
        extra={"event": "db.read_only_server", "database": alias},
    )


def drop_if_read_only(database: BaseDatabaseWrapper, error: BaseException) -> None:
    """After ``error`` on ``database``'s connection: if the server refused a
    write as read-only, closes the connection, at once in autocommit, else
    where Django next checks it (``close_old_connections()``, at the end of
    a request) once the transaction is over."""
    if not _is_read_only_error(error) or database.connection is None:
        return
    log_read_only(database.alias)
    if database.in_atomic_block:
        database.close_at = 0
    else:
        database.close()
