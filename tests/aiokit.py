"""Shared tools for the async tests: running a coroutine on a loop of its
own, holding a key's claim open, and seeing statements wait behind it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
from django.db import connection

from astral_taskclaim.claims.async_api import aclose_connections
from astral_taskclaim.db.connections import connection_params

T = TypeVar("T")
DEADLINE = 30.0


def run(coroutine: Awaitable[T]) -> T:
    """``coroutine``'s result, on a fresh event loop whose connections are
    closed afterwards."""

    async def main() -> T:
        try:
            return await coroutine
        finally:
            await aclose_connections()

    return asyncio.run(main())


@asynccontextmanager
async def key_locked(key: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A session holding an uncommitted claim of ``key``: every claim of the
    key waits on it until the block ends (and rolls it back)."""
    blocker = await psycopg.AsyncConnection.connect(**connection_params(connection))
    try:
        await blocker.execute(
            "INSERT INTO taskclaim.claim (key, expires_at, token) "
            "VALUES (%s, now() + interval '1 hour', gen_random_uuid())",
            [key],
        )
        yield blocker
        await blocker.rollback()
    finally:
        await blocker.close()


async def waiting_behind(blocker: psycopg.AsyncConnection[Any], count: int) -> None:
    """Returns once ``count`` sessions wait on ``blocker``'s transaction;
    PostgreSQL has no event for a session starting to wait, so this polls."""
    pid = blocker.info.backend_pid
    deadline = asyncio.get_running_loop().time() + DEADLINE
    async with await psycopg.AsyncConnection.connect(
        **connection_params(connection), autocommit=True
    ) as observer:
        while True:
            cursor = await observer.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY (pg_blocking_pids(pid))",
                [pid],
            )
            row = await cursor.fetchone()
            assert row is not None
            if row[0] >= count:
                assert row[0] == count, f"{row[0]} sessions wait, expected {count}"
                return
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{row[0]} sessions wait, expected {count}")
            await asyncio.sleep(0.01)
