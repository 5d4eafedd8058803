"""The async functions' connection pools: statements side by side up to the
pool size, connections kept between calls, dead ones replaced."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from asgiref.sync import async_to_sync
from django.db import OperationalError, connection
from django.test import override_settings

from astral_taskclaim import aclaim_task
from astral_taskclaim.db.aio_pool import Pool, pool
from tests.aiokit import key_locked, run, waiting_behind
from tests.claimkit import (
    claims,
    terminate,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


@pytest.mark.parametrize(("pool_size", "callers", "side_by_side"), [(10, 6, 6), (3, 8, 3)])
def test_statements_run_side_by_side_up_to_the_pool_size(
    pool_size: int, callers: int, side_by_side: int
) -> None:
    async def scenario() -> tuple[list[str | None], int]:
        async with key_locked("hot") as blocker:
            calls = [
                asyncio.ensure_future(aclaim_task("hot", window_seconds=600))
                for _ in range(callers)
            ]
            await waiting_behind(blocker, side_by_side)
            opened = size(await pool(connection.alias))
        return list(await asyncio.gather(*calls)), opened

    with override_settings(TASKCLAIM_ASYNC_POOL=pool_size):
        results, opened = run(scenario())
    assert opened == side_by_side
    tokens = [token for token in results if token is not None]
    assert len(tokens) == 1
    assert claims()["hot"][0] == tokens[0]


def test_a_connection_is_kept_for_the_next_call() -> None:
    async def scenario() -> tuple[Pool, Pool, int]:
        first = await pool(connection.alias)
        await aclaim_task("a", window_seconds=60)
        await aclaim_task("b", window_seconds=60)
        return first, await pool(connection.alias), size(first)

    first, second, held = run(scenario())
    assert first is second
    assert held == 1


def test_a_connection_that_died_while_idle_is_replaced_and_the_call_succeeds() -> None:
    async def scenario() -> tuple[str | None, int, int]:
        await aclaim_task("first", window_seconds=60)
        async with (await pool(connection.alias)).connection() as kept:
            dead = kept.info.backend_pid
        await asyncio.to_thread(terminate, dead)
        token = await aclaim_task("second", window_seconds=60)
        async with (await pool(connection.alias)).connection() as kept:
            return token, dead, kept.info.backend_pid

    token, dead, now = run(scenario())
    assert token is not None
    assert claims()["second"][0] == token
    assert now != dead


def size(current: Pool) -> int:
    """Connections the pool holds, idle or in use."""
    return current.get_stats()["pool_size"]


def test_changed_settings_give_a_new_pool_and_close_the_old() -> None:
    async def scenario() -> tuple[Pool, Pool, bool]:
        await aclaim_task(str(uuid.uuid4()), window_seconds=60)
        before = await pool(connection.alias)
        with override_settings(TASKCLAIM_ASYNC_POOL=2):
            after = await pool(connection.alias)
            assert await aclaim_task(str(uuid.uuid4()), window_seconds=60) is not None
        return before, after, after.closed

    before, after, after_closed = run(scenario())
    assert before is not after
    assert (before.closed, after_closed, after.max_size) == (True, False, 2)


def test_a_loop_ending_without_aclose_connections_closes_its_pool() -> None:
    async def claim() -> Pool:
        assert await aclaim_task(str(uuid.uuid4()), window_seconds=60) is not None
        return await pool(connection.alias)

    assert asyncio.run(claim()).closed  # asyncio.run() shuts the loop down
    assert async_to_sync(claim)().closed  # a loop per call


def test_a_connection_that_cannot_be_made_raises_its_own_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not the pool's "couldn't get a connection" after its 30 s timeout: the
    server's own refusal, naming the cause, and the next call tries again."""
    connection.ensure_connection()  # made before, so it keeps working
    with monkeypatch.context() as patch:
        patch.setitem(connection.settings_dict, "NAME", "taskclaim_no_such_database")
        with pytest.raises(OperationalError, match="taskclaim_no_such_database"):
            run(aclaim_task("k", window_seconds=60))
    assert run(aclaim_task("k", window_seconds=60)) is not None
