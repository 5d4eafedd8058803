"""manage.py taskclaim_relay: relaying an outbox, and a relay SIGKILLed in the
middle of a batch losing nothing."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from astral_taskclaim.claims.bulk import enqueue_claimed_many
from astral_taskclaim.queues import create_queue
from astral_taskclaim.worker.relay import Relay
from tests.claimkit import raw_connection, until
from tests.queues.cloudflare_server import CloudflareQueuesServer
from tests.queues.servers import CloudflareOutbox
from tests.reliability.processes import subprocess_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

DEADLINE = 60.0


@pytest.fixture
def outbox(cloudflare_outbox: CloudflareOutbox) -> CloudflareOutbox:
    """The Cloudflare queue with an outbox the relay serves."""
    return cloudflare_outbox


def enqueue(outbox: CloudflareOutbox, count: int) -> list[str]:
    keys = [f"relay:{n}" for n in range(count)]
    queue = create_queue(outbox.alias)
    enqueue_claimed_many(queue, [(key, {"key": key}) for key in keys], window_seconds=600)
    return keys


def stored_keys(server: CloudflareQueuesServer, outbox: CloudflareOutbox) -> list[str]:
    return [json.loads(message.body)["key"] for message in server.stored(outbox.queue_id)]


def test_burst_relays_the_outbox_and_reports(
    outbox: CloudflareOutbox,
    cloudflare_server: CloudflareQueuesServer,
) -> None:
    keys = enqueue(outbox, 250)
    out = io.StringIO()
    call_command("taskclaim_relay", outbox.alias, "--burst", stdout=out, stderr=io.StringIO())
    assert out.getvalue() == (
        f"{outbox.alias}: 250 sent in 3 batches, 0 failed sends, 0 database errors, 0 set aside\n"
    )
    assert sorted(stored_keys(cloudflare_server, outbox)) == sorted(keys)
    assert outbox.rows() == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "unknown queue 'nope'"),
        (["plain"], "queue 'plain' has no outbox"),
        (["relay", "--poll-interval", "0"], "must be above 0"),
    ],
)
def test_bad_arguments_are_named(
    cloudflare_options: Any,
    args: list[str],
    message: str,
) -> None:
    backend = "astral_taskclaim.queues.cloudflare.CloudflareQueue"
    config = {
        "plain": {"BACKEND": backend, "OPTIONS": cloudflare_options()},
        "relay": {"BACKEND": backend, "OPTIONS": cloudflare_options(outbox=True)},
    }
    with override_settings(TASKCLAIM_QUEUES=config), pytest.raises(CommandError, match=message):
        call_command("taskclaim_relay", *args)


def test_a_relay_killed_mid_batch_loses_nothing(
    outbox: CloudflareOutbox,
    cloudflare_server: CloudflareQueuesServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    keys = enqueue(outbox, 250)
    # The service holds the relay's first request until the relay is dead.
    arrived, release = threading.Event(), threading.Event()
    handle = cloudflare_server.handle

    def held(path: str, authorization: str | None, raw: bytes) -> tuple[int, Any, dict]:
        if outbox.queue_id in path and not arrived.is_set():
            arrived.set()
            release.wait(DEADLINE)
        return handle(path, authorization, raw)

    monkeypatch.setattr(cloudflare_server, "handle", held)
    application_name = f"tc-relay-{uuid.uuid4().hex[:12]}"
    env = subprocess_env(application_name, TASKCLAIM_RELIABILITY_QUEUES=json.dumps(outbox.config()))
    output = tmp_path / "relay.log"
    with output.open("wb") as stream:
        process = subprocess.Popen(
            [sys.executable, "-m", "django", "taskclaim_relay", outbox.alias, "--skip-checks"],
            env=env,
            stdout=stream,
            stderr=subprocess.STDOUT,
        )
    try:
        assert arrived.wait(DEADLINE), output.read_text()
        process.kill()
        process.wait(DEADLINE)
    finally:
        release.set()
        if process.poll() is None:
            process.kill()

    def relay_gone() -> bool:
        with raw_connection() as other:
            row = other.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                [application_name],
            ).fetchone()
        return row == (0,)

    # Its batch's locks go with its connection (no event to await for that).
    until(relay_gone)
    assert len(outbox.rows()) == 250  # nothing was deleted
    assert Relay(outbox.alias, burst=True).run().sent == 250
    # At least once: every task arrived; the held batch may have arrived twice.
    delivered = stored_keys(cloudflare_server, outbox)
    assert set(delivered) == set(keys)
    assert len(delivered) <= 250 + 100
    assert outbox.rows() == []
