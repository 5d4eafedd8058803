"""A remote queue's transactional outbox: enqueues write claim and outbox row
together, with the caller's transaction; the checks; outbox_status()."""

from __future__ import annotations

import asyncio
import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from astral_taskclaim.claims.async_api import aenqueue_claimed
from astral_taskclaim.claims.bulk import enqueue_claimed_many
from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.queues import create_queue
from astral_taskclaim.queues.cloudflare import CloudflareQueue
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.queues.outbox import _DEPTH_BOUND, outbox_status
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.queues.sqs import SQSQueue
from astral_taskclaim.worker.relay import Relay
from tests.claimkit import claims

from .cloudflare_server import CloudflareQueuesServer
from .servers import CloudflareOutbox, MotoSQS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


class CallerFailed(Exception):
    pass


def test_an_enqueue_rolled_back_with_its_transaction_sends_nothing(
    cloudflare_outbox: CloudflareOutbox, cloudflare_server: CloudflareQueuesServer
) -> None:
    queue = create_queue(cloudflare_outbox.alias)
    requests_before = len(cloudflare_server.requests)

    def enqueue_then_fail() -> None:
        with transaction.atomic():
            assert enqueue_claimed(queue, "one", {"n": 1}, window_seconds=60) is not None
            assert None not in enqueue_claimed_many(queue, [("a", 1), ("b", 2)], window_seconds=60)
            queue.send({"raw": True})
            assert len(cloudflare_outbox.rows()) == 4
            raise CallerFailed

    with pytest.raises(CallerFailed):
        enqueue_then_fail()
    assert cloudflare_outbox.rows() == []
    assert claims() == {}
    assert Relay(cloudflare_outbox.alias, burst=True).run().sent == 0
    assert cloudflare_server.stored(cloudflare_outbox.queue_id) == []
    assert len(cloudflare_server.requests) == requests_before


def test_claim_and_outbox_row_commit_in_one_statement_and_the_relay_sends_the_bytes(
    cloudflare_outbox: CloudflareOutbox, cloudflare_server: CloudflareQueuesServer
) -> None:
    queue = create_queue(cloudflare_outbox.alias)
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        token = enqueue_claimed(queue, "room:1", {"name": "Zoë"}, window_seconds=300)
    assert [q["sql"] for q in queries if "taskclaim.outbox" in q["sql"]] != []
    assert len([q for q in queries if "taskclaim" in q["sql"]]) == 1
    expected = f'{{"key":"room:1","claim":"{token}","windowSeconds":300,"task":{{"name":"Zoë"}}}}'
    assert cloudflare_outbox.rows() == [expected]
    # A held key writes nothing.
    assert enqueue_claimed(queue, "room:1", {"name": "again"}, window_seconds=300) is None
    assert len(cloudflare_outbox.rows()) == 1
    assert Relay(cloudflare_outbox.alias, burst=True).run().sent == 1
    [stored] = cloudflare_server.stored(cloudflare_outbox.queue_id)
    assert (stored.body, stored.content_type) == (expected, "json")
    assert cloudflare_outbox.rows() == []


def test_bulk_and_async_enqueues_go_to_the_outbox(cloudflare_outbox: CloudflareOutbox) -> None:
    queue = create_queue(cloudflare_outbox.alias)
    tokens = enqueue_claimed_many(queue, [("a", 1), ("b", 2), ("a", 3)], window_seconds=60)
    assert tokens[2] is None
    token = asyncio.run(aenqueue_claimed(queue, "c", 4, window_seconds=60))
    rows = [json.loads(body) for body in cloudflare_outbox.rows()]
    assert [(row["key"], row["claim"], row["task"]) for row in rows] == [
        ("a", tokens[0], 1),
        ("b", tokens[1], 2),
        ("c", token, 4),
    ]
    assert set(claims()) == {"a", "b", "c"}


def test_a_body_the_service_would_refuse_raises_before_anything_is_written(
    cloudflare_outbox: CloudflareOutbox,
) -> None:
    queue = create_queue(cloudflare_outbox.alias)
    with pytest.raises(ValueError, match="over the 127900-byte limit"):
        enqueue_claimed_many(queue, [("a", 1), ("b", "x" * 128_000)], window_seconds=60)
    with pytest.raises(ValueError, match=r"delay_seconds must be in \[0, 43200\]"):
        queue.send({"n": 1}, delay_seconds=50_000)
    assert cloudflare_outbox.rows() == []
    assert claims() == {}


def test_the_one_statement_serves_only_the_claims_database(
    cloudflare_outbox: CloudflareOutbox,
) -> None:
    queue = create_queue(cloudflare_outbox.alias)
    # Claims on another alias are written first, then the outbox row (and
    # inside a transaction that is refused, as for any queue elsewhere).
    assert queue.claimed_insert("sqlite") is None
    assert queue.claimed_insert("default") is not None
    assert CloudflareQueue("plain", options={}).claimed_insert("default") is None


def test_sqs_with_an_outbox_relays_everything_in_batches_of_ten(moto_sqs: MotoSQS) -> None:
    url = moto_sqs.create_queue()
    config = {
        "sqs-outbox": {
            "BACKEND": "astral_taskclaim.queues.sqs.SQSQueue",
            "OPTIONS": moto_sqs.options(url, outbox=True, wait_time_seconds=0),
        }
    }
    try:
        with override_settings(TASKCLAIM_QUEUES=config):
            queue = create_queue("sqs-outbox")
            assert isinstance(queue, SQSQueue)
            items = [(f"k{n}", {"text": "\ufffe" if n == 0 else n}) for n in range(25)]
            with transaction.atomic():
                enqueue_claimed_many(queue, items, window_seconds=60)
            stats = Relay("sqs-outbox", burst=True).run()
            assert (stats.sent, stats.batches) == (25, 3)
            received: list[Any] = []
            while len(received) < 25:
                batch = queue.receive(max_messages=10, wait_seconds=1)
                assert batch.messages
                received.extend(message.body for message in batch.messages)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM taskclaim.outbox WHERE queue = 'sqs-outbox'")
    assert sorted(body["key"] for body in received) == sorted(key for key, _ in items)
    assert {"text": "\ufffe"} in [body["task"] for body in received]


@pytest.mark.parametrize(
    "queue",
    [
        lambda: PostgresQueue("local", options={"outbox": True}),
        lambda: MemoryQueue("local", options={"outbox": True}),
    ],
    ids=["postgres", "memory"],
)
def test_an_outbox_on_a_local_queue_is_check_e015(queue: Any) -> None:
    [message] = queue().check()
    assert message.id == "astral_taskclaim.E015"
    assert "remote queues (Cloudflare, SQS) only" in message.msg


def test_an_outbox_needs_a_postgresql_claims_database(
    cloudflare_options: Any,
) -> None:
    options = cloudflare_options(outbox=True)
    with override_settings(TASKCLAIM_DATABASE="sqlite"):
        messages = CloudflareQueue("cf", options=options).check()
    assert [message.id for message in messages] == ["astral_taskclaim.E015"]
    assert "TASKCLAIM_DATABASE ('sqlite') to be PostgreSQL" in messages[0].msg
    assert CloudflareQueue("cf", options=options).check() == []


def test_outbox_status_gives_depth_and_oldest_row(cloudflare_outbox: CloudflareOutbox) -> None:
    [empty] = outbox_status()
    assert (empty.queue, empty.depth, empty.depth_exact, empty.oldest_seconds) == (
        cloudflare_outbox.alias,
        0,
        True,
        None,
    )
    queue = create_queue(cloudflare_outbox.alias)
    enqueue_claimed_many(queue, [(f"k{n}", n) for n in range(3)], window_seconds=60)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE taskclaim.outbox SET enqueued_at = now() - interval '90 seconds' "
            "WHERE id = (SELECT min(id) FROM taskclaim.outbox WHERE queue = %s)",
            [cloudflare_outbox.alias],
        )
    [status] = outbox_status()
    assert (status.depth, status.depth_exact) == (3, True)
    assert status.oldest_seconds is not None
    assert 90 <= status.oldest_seconds < 150
    assert outbox_status(["nothing-here"])[0].depth == 0


def test_a_deep_outbox_is_counted_up_to_the_bound(cloudflare_outbox: CloudflareOutbox) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO taskclaim.outbox (queue, body) "
            "SELECT %s, '{}' FROM generate_series(1, %s)",
            [cloudflare_outbox.alias, _DEPTH_BOUND + 5],
        )
    [status] = outbox_status()
    assert (status.depth, status.depth_exact) == (_DEPTH_BOUND, False)


def test_the_admin_overview_shows_each_outbox(
    cloudflare_outbox: CloudflareOutbox, admin_client: Any
) -> None:
    queue = create_queue(cloudflare_outbox.alias)
    enqueue_claimed_many(queue, [("a", 1), ("b", 2)], window_seconds=60)
    html = admin_client.get(reverse("admin:astral_taskclaim_overview")).content.decode()
    table = html[html.index('id="taskclaim-outbox-counts"') :].split("</table>")[0]
    assert f'<th scope="row">{cloudflare_outbox.alias}</th>' in table
    assert '<td class="taskclaim-number">2</td>' in table
    # A row set aside is counted and linked to the admin's list of them.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE taskclaim.outbox SET dead_at = now() WHERE body LIKE %s", ['%"key":"a"%']
        )
    html = admin_client.get(reverse("admin:astral_taskclaim_overview")).content.decode()
    table = html[html.index('id="taskclaim-outbox-counts"') :].split("</table>")[0]
    assert '<td class="taskclaim-number">1</td>' in table
    assert 'state=dead">1</a>' in table


def test_the_status_command_shows_each_outbox_depth_and_oldest_row(
    cloudflare_outbox: CloudflareOutbox,
) -> None:
    queue = create_queue(cloudflare_outbox.alias)
    enqueue_claimed(queue, "status:1", {"n": 1}, window_seconds=60)
    enqueue_claimed(queue, "status:2", {"n": 2}, window_seconds=60)
    out = StringIO()
    call_command("taskclaim_status", "--json", stdout=out)
    found = json.loads(out.getvalue())["outboxes"][cloudflare_outbox.alias]
    assert (found["depth"], found["depth_exact"]) == (2, True)
    assert 0 <= found["oldest_seconds"] < 60
    out = StringIO()
    call_command("taskclaim_status", stdout=out)
    assert f"outbox of {cloudflare_outbox.alias}: 2 rows waiting for the relay" in out.getvalue()
