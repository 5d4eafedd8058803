"""The outbox relay against the local Cloudflare server: batches at the
service's limits, outages and rate limits on a simulated clock, and partial
sends that delete only what the service accepted."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.test import override_settings

from astral_taskclaim.claims.bulk import enqueue_claimed_many
from astral_taskclaim.queues import create_queue
from astral_taskclaim.worker.relay import Relay
from tests.claimkit import raw_connection

from .cloudflare_server import CloudflareQueuesServer
from .servers import CloudflareOutbox

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


class Clock:
    """Simulated time: the relay's waits move it forward at once."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


def enqueue(outbox: CloudflareOutbox, count: int, *, size: int = 0) -> list[str]:
    """Enqueues ``count`` tasks (of about ``size`` bytes) to the outbox; their keys."""
    queue = create_queue(outbox.alias)
    keys = [f"task:{n}" for n in range(count)]
    for start in range(0, count, 1000):
        chunk = keys[start : start + 1000]
        enqueue_claimed_many(queue, [(k, {"pad": "x" * size}) for k in chunk], window_seconds=600)
    return keys


def stored_keys(server: CloudflareQueuesServer, outbox: CloudflareOutbox) -> list[str]:
    return [json.loads(message.body)["key"] for message in server.stored(outbox.queue_id)]


def sends(server: CloudflareQueuesServer, outbox: CloudflareOutbox) -> list[int]:
    """Statuses of the send requests the server answered for this queue."""
    return [
        request.status
        for request in server.requests
        if outbox.queue_id in request.path and request.path.endswith("/batch")
    ]


def refuse_while(
    monkeypatch: pytest.MonkeyPatch,
    server: CloudflareQueuesServer,
    outbox: CloudflareOutbox,
    refusing: Callable[[], bool],
) -> None:
    """The server answers this queue's requests 503 while ``refusing()``."""
    handle = server.handle

    def outage(path: str, authorization: str | None, raw: bytes) -> tuple[int, Any, dict]:
        if outbox.queue_id in path and refusing():
            error = {"code": 15000, "message": "Service unavailable"}
            return 503, {"success": False, "errors": [error], "messages": []}, {}
        return handle(path, authorization, raw)

    monkeypatch.setattr(server, "handle", outage)


def test_ten_thousand_enqueues_reach_the_service_in_at_most_100_requests(
    cloudflare_outbox: CloudflareOutbox, cloudflare_server: CloudflareQueuesServer
) -> None:
    keys = enqueue(cloudflare_outbox, 10_000)
    stats = Relay(cloudflare_outbox.alias, burst=True).run()
    assert stats.sent == 10_000
    assert len(sends(cloudflare_server, cloudflare_outbox)) <= 100
    assert sorted(stored_keys(cloudflare_server, cloudflare_outbox)) == sorted(keys)
    assert cloudflare_outbox.rows() == []


def test_a_ten_minute_outage_loses_nothing(
    cloudflare_outbox: CloudflareOutbox,
    cloudflare_server: CloudflareQueuesServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys = enqueue(cloudflare_outbox, 250)
    clock = Clock()
    depths: list[int] = []
    refuse_while(monkeypatch, cloudflare_server, cloudflare_outbox, lambda: clock.now < 600)

    def sleep(seconds: float) -> None:
        depths.append(len(cloudflare_outbox.rows()))
        clock.sleep(seconds)

    relay = Relay(
        cloudflare_outbox.alias, burst=True, max_backoff=60, sleep=sleep, jitter=lambda b: b
    )
    stats = relay.run()
    assert clock.now >= 600
    # Every row stayed in the outbox through the outage, then all arrived once.
    assert set(depths) == {250}
    assert sorted(stored_keys(cloudflare_server, cloudflare_outbox)) == sorted(keys)
    assert stats.sent == 250
    # Backoff doubling to 60 s: a request every minute at most, not a storm.
    assert clock.waits[:7] == [1, 2, 4, 8, 16, 32, 60]
    assert stats.send_failures == len(clock.waits) < 20
    assert sends(cloudflare_server, cloudflare_outbox).count(503) == stats.send_failures


@pytest.mark.parametrize("retry_after", ["7", "300"])
def test_a_429_is_waited_out_as_retry_after_asks(
    cloudflare_outbox: CloudflareOutbox, cloudflare_server: CloudflareQueuesServer, retry_after: str
) -> None:
    enqueue(cloudflare_outbox, 3)
    clock = Clock()
    cloudflare_server.fail_next(1, status=429, retry_after=retry_after, code=971)
    relay = Relay(cloudflare_outbox.alias, burst=True, sleep=clock.sleep, jitter=lambda b: b)
    assert relay.run().sent == 3
    # Retry-After wins over the 1 s backoff, even past max_backoff_seconds.
    assert clock.waits == [float(retry_after)]
    assert sends(cloudflare_server, cloudflare_outbox) == [429, 200]


def test_a_batch_sent_in_part_deletes_only_the_rows_sent(
    cloudflare_outbox: CloudflareOutbox, cloudflare_server: CloudflareQueuesServer
) -> None:
    # Three 100 kB bodies: Cloudflare takes two per request (256,000 bytes).
    keys = enqueue(cloudflare_outbox, 3, size=100_000)
    cloudflare_server.fail_next(1, status=500, after=1)
    clock = Clock()
    relay = Relay(cloudflare_outbox.alias, burst=True, sleep=clock.sleep, jitter=lambda b: b)
    with pytest.raises(Exception, match="2 of 3 bodies had been sent"):
        relay.relay_batch()
    # The two bodies sent are gone from the outbox; the third waits.
    [left] = cloudflare_outbox.rows()
    assert json.loads(left)["key"] == keys[2]
    assert relay.run().sent == 3  # the two of the first batch, then the third
    # Each body reached the service exactly once.
    assert sorted(stored_keys(cloudflare_server, cloudflare_outbox)) == sorted(keys)
    assert sends(cloudflare_server, cloudflare_outbox) == [200, 500, 200]


def test_relays_side_by_side_skip_each_others_rows(
    cloudflare_outbox: CloudflareOutbox, cloudflare_server: CloudflareQueuesServer
) -> None:
    keys = enqueue(cloudflare_outbox, 150)
    with raw_connection() as other, other.transaction():
        # Another relay's transaction holds the oldest 100 rows.
        other.execute(
            "SELECT id FROM taskclaim.outbox WHERE queue = %s ORDER BY id LIMIT 100 FOR UPDATE",
            [cloudflare_outbox.alias],
        )
        assert Relay(cloudflare_outbox.alias, burst=True).run().sent == 50
        assert sorted(stored_keys(cloudflare_server, cloudflare_outbox)) == sorted(keys[100:])
    assert Relay(cloudflare_outbox.alias, burst=True).run().sent == 100
    assert sorted(stored_keys(cloudflare_server, cloudflare_outbox)) == sorted(keys)


def test_a_queue_without_an_outbox_has_no_relay(cloudflare_options: Any) -> None:
    config = {
        "plain": {
            "BACKEND": "astral_taskclaim.queues.cloudflare.CloudflareQueue",
            "OPTIONS": cloudflare_options(),
        },
        "local": {"BACKEND": "astral_taskclaim.queues.memory.MemoryQueue"},
    }
    with override_settings(TASKCLAIM_QUEUES=config):
        for alias in config:
            with pytest.raises(ValueError, match=f"queue {alias!r} has no outbox"):
                Relay(alias)
