"""Separate psycopg connections with the settings of a Django database.

Some work cannot share Django's connection: LISTEN must outlive
transactions, pg_cron lives in another database of the same server, and
the async functions need connections of their own on the event loop.
"""

from __future__ import annotations

from typing import Any

import psycopg
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

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
