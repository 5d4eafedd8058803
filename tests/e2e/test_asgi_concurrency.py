"""Async enqueueing under a real ASGI server: uvicorn serves
``tests.e2e.asgi_site`` in a subprocess, and concurrent requests for the
same and for different keys queue one message per key per window, through
``ClaimedTask.aenqueue`` and through the Django Tasks backend's
``aenqueue``."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection

from tests.aiokit import key_locked, run, waiting_behind
from tests.claimkit import claims
from tests.e2e.support import database_url, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

ROOT = Path(__file__).resolve().parents[2]
POOL = 8
# tests.e2e.asgi_settings: the claimed task's queue, the Tasks backend's
# queue and its alias (which its result rows record).
QUEUE_NAME = "asgi-e2e"
TASKS_QUEUE_NAME = "asgi-tasks-e2e"
TASKS_QUEUE_ALIAS = "asgi-tasks"


@pytest.fixture
def asgi_server() -> Iterator[str]:
    """uvicorn serving the test site on a socket bound here; its base URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    host, port = listener.getsockname()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.e2e.asgi_settings",
        "DATABASE_URL": database_url("taskclaim-asgi-e2e"),
        "TASKCLAIM_E2E_ASYNC_POOL": str(POOL),
    }
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "uvicorn", "tests.e2e.asgi_site:application"),
            *("--fd", str(listener.fileno()), "--lifespan", "off", "--log-level", "warning"),
        ],
        cwd=ROOT,
        env=env,
        pass_fds=[listener.fileno()],
    )
    listener.close()  # the server has its own copy
    base_url = f"http://{host}:{port}"
    try:
        wait_for(lambda: _healthy(base_url, server), "the ASGI server to answer")
        yield base_url
    finally:
        server.terminate()
        server.wait(timeout=30)
        with connection.cursor() as cursor:
            cursor.execute(
                "DELETE FROM taskclaim.message WHERE queue IN (%s, %s)",
                [QUEUE_NAME, TASKS_QUEUE_NAME],
            )
            cursor.execute(
                "DELETE FROM taskclaim.task_result WHERE queue = %s", [TASKS_QUEUE_ALIAS]
            )


def _healthy(base_url: str, server: subprocess.Popen[bytes]) -> bool:
    if server.poll() is not None:
        pytest.fail(f"the ASGI server exited with status {server.returncode}")
    try:
        return httpx.get(f"{base_url}/health", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def queued_claims(queue_name: str) -> list[tuple[str, str]]:
    """(key, claim token) of every message queued on ``queue_name``."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT body FROM taskclaim.message WHERE queue = %s", [queue_name])
        bodies = [json.loads(body) for (body,) in cursor.fetchall()]
    return [(body["key"], body["claim"]) for body in bodies]


def recorded_results() -> list[tuple[str, str]]:
    """(key, id) of every Task result row the site's backend recorded."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key, id::text FROM taskclaim.task_result WHERE queue = %s",
            [TASKS_QUEUE_ALIAS],
        )
        return list(cursor.fetchall())


def post_concurrently(base_url: str, paths: list[str], hot_key: str) -> list[dict[str, Any]]:
    """POSTs every path at once while a session holds ``hot_key``'s claim
    open, and returns the JSON answers (each must be a 200) once the
    server's pool has every connection waiting behind that claim: its
    statements run at once, not one after another. Through one thread there
    would only ever be one waiting."""

    async def scenario() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=len(paths))
        async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=60) as client:
            async with key_locked(hot_key) as blocker:
                requests = [asyncio.ensure_future(client.post(path)) for path in paths]
                await waiting_behind(blocker, POOL)
            return list(await asyncio.gather(*requests))

    responses = run(scenario())
    assert [response.status_code for response in responses] == [200] * len(paths)
    return [response.json() for response in responses]


def test_concurrent_requests_queue_one_message_per_key_without_serialising(
    asgi_server: str,
) -> None:
    # 40 requests race for one key, 30 more for 15 keys, two each: all at once.
    keys = ["hot"] * 40 + [f"key-{n % 15}" for n in range(30)]
    answers = post_concurrently(asgi_server, [f"/enqueue/{k}" for k in keys], "hot")
    tokens: dict[str, list[str]] = {}
    for answer in answers:
        if answer["token"] is not None:
            tokens.setdefault(answer["key"], []).append(answer["token"])
    assert {key: len(won) for key, won in tokens.items()} == dict.fromkeys(set(keys), 1)
    assert Counter(key for key, _ in queued_claims(QUEUE_NAME)) == Counter(
        dict.fromkeys(set(keys), 1)
    )
    stored = claims()
    assert {key: stored[key][0] for key in tokens} == {key: won[0] for key, won in tokens.items()}


def test_concurrent_task_enqueues_run_once_per_key_and_share_the_holders_result(
    asgi_server: str,
) -> None:
    # 30 requests race for one key, 30 more for 10 keys, three each: all at once.
    keys = ["task-hot"] * 30 + [f"task-key-{n % 10}" for n in range(30)]
    answers = post_concurrently(asgi_server, [f"/task/{k}" for k in keys], "task-hot")
    ids: dict[str, set[str]] = {}
    for answer in answers:
        ids.setdefault(answer["key"], set()).add(answer["id"])
    assert {key: len(seen) for key, seen in ids.items()} == dict.fromkeys(set(keys), 1)
    result_ids = {key: seen.pop() for key, seen in ids.items()}
    # One run per key: its message, its result row and its claim all carry
    # the id every request for the key was answered with.
    assert sorted(queued_claims(TASKS_QUEUE_NAME)) == sorted(result_ids.items())
    assert sorted(recorded_results()) == sorted(result_ids.items())
    assert {key: token for key, (token, _) in claims().items()} == result_ids
