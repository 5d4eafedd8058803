"""Row 13, Django's public paths against the package's own, in one run,
interleaved, so each of the package's fast paths keeps a figure that says
why it is there.

- 13.1 to 13.3: row 1's workloads (fresh keys; keys already held; fresh
  keys with ``synchronous_commit`` off) sent as ``statements.run`` sends
  them (:class:`~astral_taskclaim.db.statements.Connector`, prepared on
  Django's connection) against Django's public path, ``connection.cursor()``
  and ``execute()``, on a connection with Django's own ``OPTIONS``
  ``server_side_binding: True`` and ``prepare_threshold: 5`` (so psycopg
  prepares the statement after its fifth run), and against Django's default
  cursor (client-side binding, never prepared). The headline is the public
  path's rate over the connector's: the connector is kept while the public
  path is more than 10% slower (the target "holds" then).
- 13.4: ``aenqueue_claimed`` of fresh keys on the PostgreSQL queue from
  ``TASKCLAIM_ASYNC_POOL`` (10) concurrent coroutines, through the
  package's :mod:`~astral_taskclaim.db.aio_pool` against psycopg's own
  ``psycopg_pool.AsyncConnectionPool`` (same size, same connection
  parameters, autocommit, statements prepared at once); the headline is
  psycopg_pool's rate over ours, recorded: within 5% it is as fast, and
  what keeps ours is how it fails (see :mod:`~astral_taskclaim.db.aio_pool`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any
from unittest import mock

from django.db import DatabaseError
from django.db.backends.base.base import BaseDatabaseWrapper

from astral_taskclaim.core.not_migrated import explains_missing_tables
from astral_taskclaim.db import sqlfiles
from astral_taskclaim.db.connections import drop_if_read_only
from astral_taskclaim.db.statements import _explains_event_loop

from . import claim_floor
from .common import Context, Figure, alternating_rates, rate
from .report import Row

CONNECTOR = "Connector (statements.run)"
PUBLIC = "connection.cursor(), server_side_binding"
DEFAULT = "connection.cursor(), Django's default"
OURS_POOL = "aio_pool"
PSYCOPG_POOL = "psycopg_pool.AsyncConnectionPool"
#: The connector stays while the public path runs at less than this share of it.
CURSOR_RULE = 0.90
#: psycopg_pool counts as fast as ours within this share of it.
POOL_RULE = 0.95
CHUNK = claim_floor.CHUNK
HOT = claim_floor.HOT
#: Public-path connection options: Django's own, as documented.
PUBLIC_OPTIONS = {"server_side_binding": True, "prepare_threshold": 5}

#: Row 1's workloads: (row, title, keys already held, synchronous_commit off)
VARIANTS = tuple(
    (f"13.{i}", "public cursor vs Connector, " + title.removeprefix("claim floor, "), hot, off)
    for i, (_, title, hot, off) in enumerate(claim_floor.VARIANTS, 1)
)


def run(ctx: Context, *, claims: int = 5000, enqueues: int = 5000) -> list[Row]:
    """Rows 13.1 to 13.4 as described above."""
    rows = [_cursor_row(ctx, *variant, claims=claims) for variant in VARIANTS]
    rows.append(_pool_row(ctx, enqueues=enqueues))
    return rows


def _cursor_row(
    ctx: Context, number: str, title: str, hot: bool, async_commit: bool, *, claims: int
) -> Row:
    from django.db import connections

    from astral_taskclaim.db import statements

    connection = connections["default"]
    # The connector and the public path share one connection, opened with
    # the public options (the connector prepares its statements itself, so
    # they change nothing for it): only the code paths differ. Django's
    # default cursor gets a second connection with the settings as they were.
    options = connection.settings_dict.get("OPTIONS") or {}
    plain = type(connection)({**connection.settings_dict, "OPTIONS": options}, connection.alias)
    connection.close()
    connection.settings_dict["OPTIONS"] = {**options, **PUBLIC_OPTIONS}
    per_chunk = min(CHUNK, ctx.size(claims, minimum=10))
    chunks = max(1, ctx.size(claims, minimum=10) // per_chunk)
    held = [f"public:{number}:held:{i}" for i in range(HOT)]
    names = (CONNECTOR, PUBLIC, DEFAULT)
    figures = {name: Figure("claims/s") for name in names}

    def key(side: str, index: int, chunk: int, i: int) -> str:
        return held[i % HOT] if hot else f"public:{number}:{index}:{chunk}:{side}:{i}"

    path = "taskclaim/claim.sql"
    senders: dict[str, Callable[[dict[str, Any]], object]] = {
        CONNECTOR: lambda params: statements.run("default", path, params),
        PUBLIC: lambda params: public_run(connection, path, params),
        DEFAULT: lambda params: public_run(plain, path, params),
    }
    setting = "SET synchronous_commit = " + ("off" if async_commit else "on")
    try:
        for wrapper in (connection, plain):
            with wrapper.cursor() as cursor:
                cursor.execute(setting)
        for name, send in senders.items():  # warm: connect, plan, prepare
            for i in range(20):
                send({"key": f"public:{number}:warm:{name}:{i}", "seconds": 300.0})
        for k in held:
            statements.run("default", path, {"key": k, "seconds": 3600.0})
        for index in range(ctx.runs):

            def side(name: str, index: int = index) -> Callable[[int], int]:
                send, tag = senders[name], str(names.index(name))

                def chunk_of(chunk: int) -> int:
                    for i in range(per_chunk):
                        send({"key": key(tag, index, chunk, i), "seconds": 300.0})
                    return per_chunk

                return chunk_of

            # Each run starts with another side, so none is always between two.
            order = names[index % 3 :] + names[: index % 3]
            rates = alternating_rates({n: side(n) for n in order}, chunks=chunks, run=index)
            for name, value in rates.items():
                figures[name].add(value)
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM taskclaim.claim WHERE key LIKE 'public:%'")
    finally:
        plain.close()
        connection.close()  # synchronous_commit and the options as they were
        connection.settings_dict["OPTIONS"] = options
    ratio = figures[PUBLIC].median / figures[CONNECTOR].median
    default = figures[DEFAULT].median / figures[CONNECTOR].median
    return Row(
        number,
        title,
        f"{ratio:.2f}x Connector ({figures[PUBLIC].median:,.0f} vs "
        f"{figures[CONNECTOR].median:,.0f}/s; Django's default cursor {default:.2f}x)",
        f"< {CURSOR_RULE:.2f}x keeps the Connector",
        ratio < CURSOR_RULE,
        figures,
        value=ratio,
        details={
            **claim_floor.workload(per_chunk * chunks, per_chunk, hot, async_commit),
            "public_options": PUBLIC_OPTIONS,
            "default_cursor_ratio": default,
        },
    )


def _pool_row(ctx: Context, *, enqueues: int) -> Row:
    title = "aenqueue_claimed: psycopg_pool vs aio_pool"
    target = f"recorded (≥ {POOL_RULE:.2f}x: as fast)"
    try:
        import psycopg_pool
    except ImportError as error:
        return Row("13.4", title, "not measured", target, None, note=f"cannot import: {error}")
    from django.db import connection

    from astral_taskclaim.claims import async_api
    from astral_taskclaim.core.conf import app_settings
    from astral_taskclaim.db.connections import connection_params
    from astral_taskclaim.queues import queues

    size = app_settings.ASYNC_POOL
    queue = queues["bench"]
    per_chunk = min(CHUNK * 2, ctx.size(enqueues, minimum=size))
    chunks = max(1, ctx.size(enqueues, minimum=size) // per_chunk)
    figures = {name: Figure("enqueues/s") for name in (OURS_POOL, PSYCOPG_POOL)}
    params = connection_params(connection)

    class Official:
        """psycopg_pool behind the one method the async API calls."""

        def __init__(self, pool: psycopg_pool.AsyncConnectionPool[Any]) -> None:
            self.pool = pool

        async def run(self, path: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
            async with self.pool.connection() as conn:
                cursor = await conn.execute(sqlfiles.read(path), params, prepare=True)
                return await cursor.fetchall() if cursor.description else []

    async def measure() -> None:
        official = psycopg_pool.AsyncConnectionPool(
            kwargs={**params, "autocommit": True},
            min_size=size,
            max_size=size,
            open=False,
        )
        await official.open(wait=True)
        adapter = Official(official)

        async def official_pool(alias: str) -> Official:
            return adapter

        async def enqueue_chunk(tag: str, index: int, chunk: int) -> int:
            keys = iter(range(per_chunk))

            async def producer() -> None:
                for i in keys:  # the producers share the chunk's keys
                    key = f"apool:{index}:{chunk}:{tag}:{i}"
                    await async_api.aenqueue_claimed(queue, key, {"i": i}, window_seconds=300)

            await asyncio.gather(*(producer() for _ in range(size)))
            return per_chunk

        def side(tag: str, patched: bool) -> Callable[[int, int], Awaitable[int]]:
            async def chunk_of(index: int, chunk: int) -> int:
                if not patched:
                    return await enqueue_chunk(tag, index, chunk)
                with mock.patch.object(async_api, "pool", official_pool):
                    return await enqueue_chunk(tag, index, chunk)

            return chunk_of

        variants = {OURS_POOL: side("o", False), PSYCOPG_POOL: side("p", True)}
        try:
            for name in variants:  # warm: every connection opened, statements prepared
                await variants[name](-1, 0)
            for index in range(ctx.runs):
                rates = await _alternating_async(variants, chunks=chunks, run=index)
                for name, value in rates.items():
                    figures[name].add(value)
        finally:
            await official.close()
            await async_api.aclose_connections()

    asyncio.run(measure())
    with ctx.connect() as raw:
        raw.execute("DELETE FROM taskclaim.claim WHERE key LIKE 'apool:%'")
        raw.execute("DELETE FROM taskclaim.message WHERE queue = 'bench'")
    ratio = figures[PSYCOPG_POOL].median / figures[OURS_POOL].median
    return Row(
        "13.4",
        title,
        f"{ratio:.2f}x aio_pool ({figures[PSYCOPG_POOL].median:,.0f} vs "
        f"{figures[OURS_POOL].median:,.0f}/s)",
        target,
        None,  # aio_pool stays for how it fails, not for speed: see its docstring
        figures,
        value=ratio,
        details={"enqueues_per_run": per_chunk * chunks, "chunk": per_chunk, "producers": size},
    )


@explains_missing_tables
@_explains_event_loop
def public_run(
    connection: BaseDatabaseWrapper, path: str, params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """What ``statements.run`` would be on Django's public path: the shipped
    file through ``connection.cursor()``, with the same error handling."""
    query = sqlfiles.read(path)
    try:
        with connection.cursor() as cursor:
            cursor.execute(query, params)
            return cursor.fetchall() if cursor.description else []
    except DatabaseError as error:
        drop_if_read_only(connection, error)
        raise


async def _alternating_async(
    variants: dict[str, Callable[[int, int], Awaitable[int]]], *, chunks: int, run: int
) -> dict[str, float]:
    """:func:`~benchmarks.common.alternating_rates` for coroutines."""
    done = dict.fromkeys(variants, 0)
    spent = dict.fromkeys(variants, 0.0)
    names = list(variants)
    for chunk in range(chunks):
        for name in names if (chunk + run) % 2 == 0 else list(reversed(names)):
            start = time.perf_counter()
            done[name] += await variants[name](run, chunk)
            spent[name] += time.perf_counter() - start
    return {name: rate(done[name], spent[name]) for name in names}
