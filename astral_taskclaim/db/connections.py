"""Separate psycopg connections with the settings of a Django database,
the server's version, dropping this thread's Django connections after a database error, and a
savepoint around a statement that may fail inside the caller's transaction.

Some work cannot share Django's connection: LISTEN must outlive
transactions, pg_cron lives in another database of the same server, and
the async functions need connections of their own on the event loop.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import psycopg
from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

logger = logging.getLogger(__name__)

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
