"""Async enqueueing under a real ASGI server: uvicorn serves
``tests.e2e.asgi_site`` in a subprocess, and concurrent requests for the
same and for different keys queue one message per key per window."""

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

import httpx
import pytest
from django.db import connection

from tests.aiokit import key_locked, run, waiting_behind
from tests.claimkit import claims
from tests.e2e.support import database_url, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

ROOT = Path(__file__).resolve().parents[2]
POOL = 8
QUEUE_NAME = "asgi-e2e"  # tests.e2e.asgi_settings


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
            cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [QUEUE_NAME])


def _healthy(base_url: str, server: subprocess.Popen[bytes]) -> bool:
    if server.poll() is not None:
        pytest.fail(f"the ASGI server exited with status {server.returncode}")
    try:
        return httpx.get(f"{base_url}/health", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def queued_keys() -> Counter[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT body FROM taskclaim.message WHERE queue = %s", [QUEUE_NAME])
        return Counter(json.loads(body)["key"] for (body,) in cursor.fetchall())


def test_concurrent_requests_queue_one_message_per_key_without_serialising(
    asgi_server: str,
) -> None:
    # 40 requests race for one key, 30 more for 15 keys, two each: all at once.
    keys = ["hot"] * 40 + [f"key-{n % 15}" for n in range(30)]

    async def scenario() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=len(keys))
        async with httpx.AsyncClient(base_url=asgi_server, limits=limits, timeout=60) as client:
            async with key_locked("hot") as blocker:
                requests = [asyncio.ensure_future(client.post(f"/enqueue/{k}")) for k in keys]
                # The server's statements for "hot" wait on this session's
                # uncommitted claim: as many at once as its pool has
                # connections. Through one thread there would only ever be one.
                await waiting_behind(blocker, POOL)
            return list(await asyncio.gather(*requests))

    responses = run(scenario())
    assert [response.status_code for response in responses] == [200] * len(keys)
    answers = [response.json() for response in responses]
    tokens: dict[str, list[str]] = {}
    for answer in answers:
        if answer["token"] is not None:
            tokens.setdefault(answer["key"], []).append(answer["token"])
    assert {key: len(won) for key, won in tokens.items()} == dict.fromkeys(set(keys), 1)
    assert queued_keys() == Counter(dict.fromkeys(set(keys), 1))
    stored = claims()
    assert {key: stored[key][0] for key in tokens} == {key: won[0] for key, won in tokens.items()}
