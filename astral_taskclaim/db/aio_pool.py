"""Database connections of the async functions: psycopg ``AsyncConnection``
objects in ``psycopg_pool.AsyncConnectionPool`` pools, one per event loop and
database alias.

Django (through 6.x) has no async database connections: its connections
are blocking, and using one on an event loop raises
``SynchronousOnlyOperation``. Instead each event loop gets pools of its own
connections (a pool's tasks belong to the loop that opened it), made with
the connection parameters Django uses for the alias plus its ``assume_role``
and ``isolation_level`` options, in autocommit: a claim write commits as
soon as its statement ends, as the sync functions do outside a transaction.

A pool opens connections as needed up to ``TASKCLAIM_ASYNC_POOL`` per loop
and alias. A statement that fails because a kept connection died while idle
(or is now on a standby) runs again on another; other errors are raised as
the ``django.db`` exception Django would raise. :func:`aclose_pools`, or the
loop's shutdown, closes the loop's pools.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import weakref
from collections.abc import AsyncGenerator
from typing import Any

import psycopg
from django.core.signals import setting_changed
from django.db import connections
from psycopg import IsolationLevel, sql
from psycopg_pool import AsyncConnectionPool

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.db import sqlfiles
from astral_taskclaim.db.connections import apooled, connection_params, log_read_only
from astral_taskclaim.db.statements import may_prepare

logger = logging.getLogger(__name__)

AsyncConnection = psycopg.AsyncConnection[Any]
Pool = AsyncConnectionPool[AsyncConnection]

Pools = dict[str, tuple[int, Pool]]  # alias -> (settings generation, pool)
_pools: dict[asyncio.AbstractEventLoop, tuple[Pools, AsyncGenerator[None, None]]] = {}
_pools_lock = threading.Lock()  # loops of several threads share the mapping
_generation = 0  # bumped when DATABASES or the pool size change
_served: weakref.WeakSet[AsyncConnection] = weakref.WeakSet()  # given out before: kept ones


async def pool(alias: str) -> Pool:
    """The running loop's pool for ``alias``; made on first use, and made
    again after ``override_settings`` changes the databases or pool size."""
    loop = asyncio.get_running_loop()
    with _pools_lock:
        fresh = loop not in _pools
        if fresh:
            first: Pools = {}
            _pools[loop] = first, _closing(first)
        pools, closer = _pools[loop]
        generation, current = pools.get(alias, (-1, None))
        if current is not None and generation == _generation:
            return current
        outdated, current = current, _new_pool(alias)
        pools[alias] = (_generation, current)
    if fresh:
        await closer.asend(None)  # started: see _closing
    if outdated is not None:
        await outdated.close()  # those in use are closed when they come back
    await current.open()  # its lock is new, so this opens before any other caller gets it
    try:
        await _probe(alias)
    except BaseException:
        with _pools_lock:  # the next call tries again
            if pools.get(alias, (0, None))[1] is current:
                del pools[alias]
        await current.close()
        raise
    return current


async def _configure(alias: str, connection: AsyncConnection) -> None:
    wrapper = connections[alias]
    options = wrapper.settings_dict.get("OPTIONS") or {}
    # Only the package's few statements run here, each often: prepare them
    # at once, unless the settings show a transaction-mode pooler or one
    # relays the connections (asked before preparing anything).
    if may_prepare(wrapper) and not await apooled(alias, connection):
        connection.prepare_threshold = 0
    if options.get("isolation_level") is not None:
        await connection.set_isolation_level(IsolationLevel(options["isolation_level"]))
    if options.get("assume_role"):
        role = sql.Identifier(options["assume_role"])
        await connection.execute(sql.SQL("SET ROLE {}").format(role))


def _params(alias: str) -> dict[str, Any]:
    return {**connection_params(connections[alias]), "autocommit": True, "prepare_threshold": None}


def _new_pool(alias: str) -> Pool:
    return Pool(
        kwargs=_params(alias),
        min_size=0,
        max_size=app_settings.ASYNC_POOL,
        configure=functools.partial(_configure, alias),
        open=False,
        name=f"taskclaim-{alias}",
    )


async def _probe(alias: str) -> None:
    """Connects once as the pool will: a connection that cannot be made
    (server down, wrong password, missing ``assume_role``) raises its own
    error at once, where the pool would retry it and time out after 30 s."""
    connection = await AsyncConnection.connect(**_params(alias))
    try:
        await _configure(alias, connection)
    finally:
        await connection.close()


async def run(alias: str, path: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Runs the shipped SQL file ``path`` with ``params`` on a connection of
    the running loop's pool for ``alias``; its rows (none for a statement
    without ``RETURNING``)."""
    query = sqlfiles.read(path)
    with connections[alias].wrap_database_errors:
        while True:  # each pass drops one kept connection, so this ends
            async with (await pool(alias)).connection() as connection:
                reused = connection in _served
                _served.add(connection)
                try:
                    cursor = await connection.execute(query, params)
                    return await cursor.fetchall() if cursor.description else []
                except psycopg.OperationalError:
                    if not (reused and connection.broken):
                        raise
                except psycopg.errors.ReadOnlySqlTransaction:
                    # On a standby since a failover: replaced, not kept. A new
                    # one raises, lest a name still pointing at it make this loop.
                    log_read_only(alias)
                    await connection.close()
                    if not reused:
                        raise
            logger.info(
                "%s: a pooled connection had died while idle; running the statement on another",
                alias,
                extra={"event": "aio.stale_connection", "database": alias},
            )


async def aclose_pools() -> None:
    """Closes the running loop's connections (those in use when they come
    back); the next call opens new ones."""
    with _pools_lock:
        entry = _pools.get(asyncio.get_running_loop())
    if entry is not None:
        await entry[1].aclose()


async def _closing(pools: Pools) -> AsyncGenerator[None, None]:
    """Started with a loop's first pool, it closes the loop's pools when
    :func:`aclose_pools` or the loop's shutdown ends it: ``asyncio.run()``
    and ``async_to_sync`` (a loop per call) close a loop's async generators,
    so a loop ending without ``aclose_pools()`` leaves no connection open."""
    try:
        yield
    finally:
        with _pools_lock:
            _pools.pop(asyncio.get_running_loop(), None)
        for _, each in pools.values():
            await each.close()


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    global _generation
    if setting in {"DATABASES", "TASKCLAIM_ASYNC_POOL"}:
        with _pools_lock:
            _generation += 1


setting_changed.connect(_settings_changed)
