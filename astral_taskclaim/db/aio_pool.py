"""Database connections of the async functions: psycopg ``AsyncConnection``
objects, pooled per event loop and database alias.

Django (through 6.x) has no async database connections: its connections
are blocking, and using one on an event loop raises
``SynchronousOnlyOperation``. Wrapping every statement in
``sync_to_async`` would run them all on one thread, one at a time. Instead
each event loop gets small pools of its own connections, made with the
connection parameters Django uses for the alias
(:func:`~astral_taskclaim.db.connections.connection_params`, plus the alias's
``assume_role`` and ``isolation_level`` options), in autocommit: a claim
write commits as soon as its statement ends, as the sync functions do
outside a transaction.

A pool opens connections as they are needed, up to
``TASKCLAIM_ASYNC_POOL`` (default 10) per loop and alias; a caller beyond
that waits for one to come back. A connection is never shared by two
statements at once. A connection that comes back broken, or in the middle
of a statement (its caller was cancelled), is closed instead of kept. A
statement that fails because a kept connection died while idle (the server
restarted, or an idle timeout ended it) is run again on another one; any
other error is raised as the ``django.db`` exception Django would raise.

The pools hold no tasks or threads of their own, so nothing needs starting;
:func:`aclose_pools` (``astral_taskclaim.claims.async_api.aclose_connections``) closes the
current loop's connections, e.g. at ASGI lifespan shutdown.

Why not psycopg's own ``psycopg_pool.AsyncConnectionPool``: it is as fast
(benchmark row 13.4, ``aenqueue_claimed`` of fresh keys from 10 coroutines,
interleaved with this pool: 0.93x to 0.99x this pool's rate, medians of
three runs of 5 to 7 rounds), but it fails differently. It opens connections in
background tasks that retry a failed connect with backoff, while the caller
waits: a server that refuses connections, a wrong password or a missing
``assume_role`` surfaces after the pool's timeout (30 s by default) as
"couldn't get a connection", the real error only in its log, where this
pool raises Django's exception for it at once; a caller waiting for a free
connection gets that timeout too, where here it waits its turn; and its
tasks run on every loop that claims, where these pools start nothing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from typing import Any

import psycopg
from django.core.signals import setting_changed
from django.db import connections
from psycopg import IsolationLevel, sql
from psycopg.pq import TransactionStatus

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.db import sqlfiles
from astral_taskclaim.db.connections import apooled, connection_params, log_read_only
from astral_taskclaim.db.statements import may_prepare

__all__ = ["AsyncConnection", "aclose_pools", "pool"]

logger = logging.getLogger(__name__)

AsyncConnection = psycopg.AsyncConnection[Any]


class _StaleConnection(Exception):
    """A connection kept idle in the pool turned out dead on its next use."""


class _AsyncPool:
    """Connections to one database alias for one event loop."""

    def __init__(self, alias: str, *, max_size: int, generation: int) -> None:
        self.alias = alias
        self.max_size = max_size
        self.generation = generation
        self.retired = False
        self._idle: list[AsyncConnection] = []
        self._open = 0  # idle and in use
        self._changed = asyncio.Condition()

    async def run(self, path: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Runs the shipped SQL file ``path`` with ``params``; its rows
        (none for a statement without ``RETURNING``)."""
        query = sqlfiles.read(path)
        with connections[self.alias].wrap_database_errors:
            while True:
                try:
                    return await self._run_once(query, params)
                except _StaleConnection:
                    # Each pass drops one kept connection, so this ends.
                    logger.info(
                        "%s: a pooled connection had died while idle; running the statement "
                        "on another",
                        self.alias,
                        extra={"event": "aio.stale_connection", "database": self.alias},
                    )

    async def _run_once(self, query: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        connection, reused = await self._take()
        try:
            cursor = connection.cursor()
            await cursor.execute(query, params)
            return await cursor.fetchall() if cursor.description else []
        except psycopg.OperationalError as error:
            if reused and connection.broken:
                raise _StaleConnection() from error
            raise
        except psycopg.errors.ReadOnlySqlTransaction as error:
            # On a standby since a failover: replaced, not kept. A kept one
            # runs the statement again on another; a new one raises, lest a
            # name still pointing at the standby make this loop.
            log_read_only(self.alias)
            await _close_quietly(connection)
            if reused:
                raise _StaleConnection() from error
            raise
        finally:
            await self._give_back(connection)

    async def _take(self) -> tuple[AsyncConnection, bool]:
        """A connection, and whether it was kept idle (else it is new)."""
        async with self._changed:
            while True:
                while self._idle:
                    connection = self._idle.pop()
                    if not (connection.closed or connection.broken):
                        return connection, True
                    self._open -= 1
                if self._open < self.max_size:
                    self._open += 1
                    break
                await self._changed.wait()
        try:
            return await self._connect(), False
        except BaseException:
            async with self._changed:
                self._open -= 1
                self._changed.notify()
            raise

    async def _connect(self) -> AsyncConnection:
        wrapper = connections[self.alias]
        options = wrapper.settings_dict.get("OPTIONS") or {}
        # Only the package's few statements run on these connections, each
        # often: prepare them at once, unless the settings show a
        # transaction-mode pooler (see statements.may_prepare) or one relays
        # the connections (asked before preparing anything).
        threshold = 0 if may_prepare(wrapper) else None
        connection = await psycopg.AsyncConnection.connect(
            **connection_params(wrapper), autocommit=True, prepare_threshold=None
        )
        try:
            if threshold is not None and not await apooled(self.alias, connection):
                connection.prepare_threshold = threshold
            if options.get("isolation_level") is not None:
                await connection.set_isolation_level(IsolationLevel(options["isolation_level"]))
            if options.get("assume_role"):
                role = sql.Identifier(options["assume_role"])
                await connection.execute(sql.SQL("SET ROLE {}").format(role))
        except BaseException:
            await connection.close()
            raise
        return connection

    async def _give_back(self, connection: AsyncConnection) -> None:
        keep = (
            not self.retired
            and not (connection.closed or connection.broken)
            and connection.info.transaction_status == TransactionStatus.IDLE
        )
        if not keep:
            await _close_quietly(connection)
        async with self._changed:
            if keep:
                self._idle.append(connection)
            else:
                self._open -= 1
            self._changed.notify()

    async def close(self) -> None:
        """Closes the idle connections now and the others when they come back."""
        self.retired = True
        async with self._changed:
            idle, self._idle = self._idle, []
            self._open -= len(idle)
        for connection in idle:
            await _close_quietly(connection)

    @property
    def size(self) -> int:
        """Connections open, idle or in use."""
        return self._open


async def _close_quietly(connection: AsyncConnection) -> None:
    try:
        await connection.close()
    except psycopg.Error:
        logger.debug("closing a pooled connection failed", exc_info=True)


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _AsyncPool]] = (
    weakref.WeakKeyDictionary()
)
_pools_lock = threading.Lock()  # loops of several threads share the mapping
_generation = 0  # bumped when DATABASES or the pool size change


async def pool(alias: str) -> _AsyncPool:
    """The running loop's pool for ``alias``; made on first use, and made
    again after ``override_settings`` changes the databases or pool size."""
    loop = asyncio.get_running_loop()
    with _pools_lock:
        pools = _pools.setdefault(loop, {})
        current = pools.get(alias)
        outdated = current if current is not None and current.generation != _generation else None
        if current is None or outdated is not None:
            current = pools[alias] = _AsyncPool(
                alias, max_size=app_settings.ASYNC_POOL, generation=_generation
            )
    if outdated is not None:
        await outdated.close()
    return current


async def aclose_pools() -> None:
    """Closes the running loop's connections (those in use when they come
    back); the next call opens new ones."""
    with _pools_lock:
        pools = _pools.pop(asyncio.get_running_loop(), {})
    for each in pools.values():
        await each.close()


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    global _generation
    if setting in {"DATABASES", "TASKCLAIM_ASYNC_POOL"}:
        with _pools_lock:
            _generation += 1


setting_changed.connect(_settings_changed)
