"""One refused outbox row never blocks the others, on both remote backends:
a request the service refuses is split until the culprit is alone, which
is set aside with its reason and its claim released; an entry refused for
a passing fault waits out a backoff of its own; ``--burst`` returns."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from moto.sqs.models import SQSBackend, sqs_backends

from astral_taskclaim.claims.bulk import enqueue_claimed_many
from astral_taskclaim.claims.claim import claim_task
from astral_taskclaim.queues import create_queue
from astral_taskclaim.worker.relay import Relay
from tests.claimkit import claims

from .cloudflare_server import CloudflareQueuesServer
from .servers import CloudflareOutbox, MotoSQS, recorded

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


def outbox(alias: str) -> list[tuple[str, int, str | None, bool, bool]]:
    """The rows of ``alias``'s outbox: key, attempts, last error, set aside,
    waiting (available later)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT body, attempts, last_error, dead_at IS NOT NULL, "
            "available_at > statement_timestamp() FROM taskclaim.outbox WHERE queue = %s "
            "ORDER BY id",
            [alias],
        )
        return [(json.loads(body)["key"], *rest) for body, *rest in cursor.fetchall()]


def enqueue(alias: str, keys: list[str], *, size: int = 10) -> None:
    queue = create_queue(alias)
    for start in range(0, len(keys), 1000):
        chunk = [(key, {"pad": "x" * size}) for key in keys[start : start + 1000]]
        enqueue_claimed_many(queue, chunk, window_seconds=600)


def write_row(alias: str, key: str, size: int) -> None:
    """Claims ``key`` and writes its outbox row as it stands, ``size`` bytes
    of task, past the checks ``encode`` makes (a row from before a limit
    changed, or written by another producer)."""
    token = claim_task(key, window_seconds=600)
    body = json.dumps({"key": key, "claim": token, "windowSeconds": 600, "task": "x" * size})
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO taskclaim.outbox (queue, body) VALUES (%s, %s)", [alias, body])


class NoWaits:
    """The relay's sleep: records what it would have waited."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def relay_all(alias: str, **options: Any) -> tuple[Any, NoWaits, float]:
    waits = NoWaits()
    started = time.perf_counter()
    stats = Relay(alias, burst=True, sleep=waits, jitter=lambda b: b, **options).run()
    return stats, waits, time.perf_counter() - started


@pytest.fixture
def sqs_outbox(moto_sqs: MotoSQS) -> Iterator[tuple[str, str]]:
    """An SQS queue taking messages of at most 1,024 bytes, with an outbox:
    its alias and URL."""
    url = moto_sqs.create_queue(MaximumMessageSize="1024")
    alias = f"sqs-{uuid.uuid4().hex[:12]}"
    options = moto_sqs.options(url, outbox=True, wait_time_seconds=0)
    config = {alias: {"BACKEND": "astral_taskclaim.queues.sqs.SQSQueue", "OPTIONS": options}}
    with override_settings(TASKCLAIM_QUEUES=config):
        yield alias, url
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.outbox WHERE queue = %s", [alias])


def sqs_keys(url: str) -> list[str]:
    """The keys of the messages in the SQS queue at ``url``, read from the
    moto server's state in this process (receiving them is slow)."""
    name = url.rsplit("/", 1)[1]
    for account in sqs_backends.values():
        for backend in account.values():
            if name in backend.queues:
                return [json.loads(m.body)["key"] for m in backend.queues[name]._messages]
    raise LookupError(url)


def test_one_row_cloudflare_refuses_among_1000_is_set_aside_and_999_flow(
    cloudflare_outbox: CloudflareOutbox, cloudflare_server: CloudflareQueuesServer
) -> None:
    alias, outbox_id = cloudflare_outbox.alias, cloudflare_outbox.queue_id
    keys = [f"task:{n}" for n in range(999)]
    enqueue(alias, keys[:500])
    # 130,000 bytes: over Cloudflare's 128,000-byte message limit.
    write_row(alias, "too-big", 130_000)
    enqueue(alias, keys[500:])
    stats, waits, seconds = relay_all(alias)
    stored = [json.loads(m.body)["key"] for m in cloudflare_server.stored(outbox_id)]
    assert sorted(stored) == sorted(keys)
    assert (stats.sent, stats.set_aside, stats.send_failures) == (999, 1, 0)
    # Nothing waited on it: no backoff at all.
    assert waits.waits == []
    [(key, attempts, error, dead, _)] = outbox(alias)
    assert (key, attempts, dead) == ("too-big", 1, True)
    assert "HTTP 400: 10204 Message size out of bounds" in str(error)
    # Its claim is released, as after a failed send; the others hold.
    assert "too-big" not in claims()
    assert len(claims()) == 999
    requests = [r for r in cloudflare_server.requests if cloudflare_outbox.queue_id in r.path]
    # The figures docs/reliability.md quotes (shown with -s).
    print(f"cloudflare: 999 sent, 1 set aside, {len(requests)} requests, {seconds:.2f} s")


def test_one_row_over_the_sqs_queues_message_size_among_1000_is_set_aside(
    moto_sqs: MotoSQS, sqs_outbox: tuple[str, str]
) -> None:
    alias, url = sqs_outbox
    keys = [f"task:{n}" for n in range(999)]
    enqueue(alias, keys[:500])
    # Under the backend's 256 KiB, over this queue's MaximumMessageSize: SQS
    # refuses the whole SendMessageBatch (InvalidParameterValue).
    enqueue(alias, ["too-big"], size=2000)
    enqueue(alias, keys[500:])
    backend = create_queue(alias)
    calls = recorded(backend)
    stats, waits, seconds = relay_all(alias, backend=backend)
    assert sorted(sqs_keys(url)) == sorted(keys)
    assert (stats.sent, stats.set_aside, stats.send_failures) == (999, 1, 0)
    assert waits.waits == []
    [(key, attempts, error, dead, _)] = outbox(alias)
    assert (key, attempts, dead) == ("too-big", 1, True)
    assert "InvalidParameterValue" in str(error)
    assert "Message must be shorter than 1024 bytes" in str(error)
    assert "too-big" not in claims()
    assert len(claims()) == 999
    requests = [name for name, _ in calls if name == "SendMessageBatch"]
    print(f"sqs: 999 sent, 1 set aside, {len(requests)} requests, {seconds:.2f} s")


@pytest.mark.parametrize("sender_fault", [True, False])
def test_an_entry_sqs_lists_as_failed_does_not_hold_the_others_back(
    moto_sqs: MotoSQS,
    sqs_outbox: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    sender_fault: bool,
) -> None:
    alias, url = sqs_outbox
    original = SQSBackend.send_message_batch

    def refusing(self: Any, queue_name: str, entries: dict[str, Any]) -> Any:
        # As SQS does: the entry is listed in Failed, the others are sent.
        bad = {k: e for k, e in entries.items() if "refuse-me" in e["MessageBody"]}
        kept = {k: e for k, e in entries.items() if k not in bad}
        messages, failed = original(self, queue_name, kept) if kept else ([], [])
        code = "InvalidMessageContents" if sender_fault else "InternalError"
        failed += [
            {"Id": e["Id"], "SenderFault": sender_fault, "Code": code, "Message": "refused"}
            for e in bad.values()
        ]
        return messages, failed

    monkeypatch.setattr(SQSBackend, "send_message_batch", refusing)
    keys = [f"task:{n}" for n in range(59)]
    enqueue(alias, keys[:30])
    enqueue(alias, ["refuse-me"])
    enqueue(alias, keys[30:])
    # A first backoff of a minute: the row still waits when the others are sent.
    stats, waits, _ = relay_all(alias, first_backoff=60)
    assert sorted(sqs_keys(url)) == sorted(keys)
    # No backoff of the relay: the 59 others went at once.
    assert waits.waits == []
    [(key, attempts, error, dead, waiting)] = outbox(alias)
    assert (key, attempts) == ("refuse-me", 1)
    assert "refused" in str(error)
    if sender_fault:
        # The sender's fault: set aside for good, its claim released.
        assert (dead, waiting, stats.set_aside, stats.delayed) == (True, False, 1, 0)
        assert "refuse-me" not in claims()
    else:
        # A passing fault: the row waits out its own backoff, claim kept.
        assert (dead, waiting, stats.set_aside, stats.delayed) == (False, True, 0, 1)
        assert "refuse-me" in claims()
        monkeypatch.setattr(SQSBackend, "send_message_batch", original)
        with connection.cursor() as cursor:
            cursor.execute("UPDATE taskclaim.outbox SET available_at = statement_timestamp()")
        assert relay_all(alias)[0].sent == 1
        assert sorted(sqs_keys(url)) == sorted([*keys, "refuse-me"])


def test_a_delayed_send_waits_in_the_outbox_until_due(
    cloudflare_outbox: CloudflareOutbox, cloudflare_server: CloudflareQueuesServer
) -> None:
    queue = create_queue(cloudflare_outbox.alias)
    queue.send({"n": 1}, delay_seconds=3600)
    queue.send({"n": 2})
    assert Relay(cloudflare_outbox.alias, burst=True).run().sent == 1
    [waiting] = cloudflare_outbox.rows()
    assert json.loads(waiting) == {"n": 1}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT extract(epoch FROM available_at - enqueued_at) FROM taskclaim.outbox "
            "WHERE queue = %s",
            [cloudflare_outbox.alias],
        )
        assert 3599 <= cursor.fetchone()[0] <= 3601
        cursor.execute("UPDATE taskclaim.outbox SET available_at = statement_timestamp()")
    assert Relay(cloudflare_outbox.alias, burst=True).run().sent == 1
    bodies = [json.loads(m.body) for m in cloudflare_server.stored(cloudflare_outbox.queue_id)]
    assert bodies == [{"n": 2}, {"n": 1}]
