"""Trailing runs on remote queues: SQS (moto over HTTP) sends after the
commit and bounds the follow-up's delay by its own limit (the follow-up
waits again when it comes early); the outbox writes follow-up and row in the
caller's transaction."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from astral_taskclaim import enqueue_claimed, enqueue_claimed_many
from astral_taskclaim.claims.trailing import Enqueued
from astral_taskclaim.consumer.consume import consume_claimed
from astral_taskclaim.queues import queues
from astral_taskclaim.queues.sqs import SQSQueue
from tests.claimkit import claims, insert_claim
from tests.queues.servers import CloudflareOutbox, MotoSQS, recorded

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


@pytest.fixture
def sqs(moto_sqs: MotoSQS) -> Iterator[SQSQueue]:
    url = moto_sqs.create_queue()
    backend = "astral_taskclaim.queues.sqs.SQSQueue"
    with override_settings(
        TASKCLAIM_QUEUES={"sqs": {"BACKEND": backend, "OPTIONS": moto_sqs.options(url)}}
    ):
        queue = queues["sqs"]
        assert isinstance(queue, SQSQueue)
        yield queue


def test_a_follow_up_on_sqs_is_delayed_at_most_900_s_and_runs_the_latest_task(
    sqs: SQSQueue,
) -> None:
    insert_claim("doc:1", seconds=3600)
    calls = recorded(sqs)
    made = enqueue_claimed(sqs, "doc:1", {"v": 1}, window_seconds=60, trailing="latest")
    assert isinstance(made, Enqueued)
    assert made.outcome == "follow_up_created"
    assert calls[-1][1]["DelaySeconds"] == 900  # SQS's longest delay: it waits again


def test_a_follow_up_on_sqs_runs_once_the_claim_ends(sqs: SQSQueue) -> None:
    insert_claim("doc:1", seconds=1)
    enqueue_claimed(sqs, "doc:1", {"v": 1}, window_seconds=60, trailing="latest")
    enqueue_claimed(sqs, "doc:1", {"v": 2}, window_seconds=60, trailing="latest")
    batch = sqs.receive(max_messages=10, wait_seconds=10)  # visible once the claim ended
    ran: list[Any] = []
    summary = consume_claimed(batch, parse=lambda task: task, run=ran.append, max_retries=1)
    sqs.settle(batch.messages)
    assert ran == [{"v": 2}]
    assert summary.ok == 1
    assert "doc:1" in claims()


def test_the_outbox_writes_the_follow_up_and_its_row_in_the_callers_transaction(
    cloudflare_outbox: CloudflareOutbox,
) -> None:
    queue = queues[cloudflare_outbox.alias]
    insert_claim("doc:1", seconds=3600)
    with transaction.atomic():
        enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing="latest")
        transaction.set_rollback(True)  # the caller's work failed
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM taskclaim.follow_up")
        assert cursor.fetchone() == (0,)
    made = enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing="latest")
    assert getattr(made, "outcome", None) == "follow_up_created"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT body, extract(epoch FROM available_at - now()) FROM taskclaim.outbox "
            "WHERE queue = %s",
            [cloudflare_outbox.alias],
        )
        [(body, due)] = cursor.fetchall()
    assert json.loads(body)["followUp"] is True
    assert due > 3500  # the relay holds it back until the claim ends


def test_the_outbox_takes_a_trailing_batch_in_one_statement(
    cloudflare_outbox: CloudflareOutbox,
) -> None:
    queue = queues[cloudflare_outbox.alias]
    insert_claim("doc:1", seconds=3600)
    items = [("doc:1", {"v": 1}), ("doc:2", {"v": 2}), ("doc:1", {"v": 3})]
    with CaptureQueriesContext(connection) as captured:
        made = enqueue_claimed_many(queue, items, window_seconds=60, trailing="latest")
    assert len(captured) == 1
    outcomes = [getattr(token, "outcome", None) for token in made]
    assert outcomes == ["follow_up_created", "sent", "merged"]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT body, extract(epoch FROM available_at - now()) FROM taskclaim.outbox "
            "WHERE queue = %s ORDER BY id",
            [cloudflare_outbox.alias],
        )
        [(later, due), (now, _)] = [(json.loads(body), due) for body, due in cursor.fetchall()]
        cursor.execute("SELECT task FROM taskclaim.follow_up")
        assert cursor.fetchall() == [('{"v":3}',)]
    assert (later["followUp"], later["claim"], due > 3500) == (True, made[0], True)
    assert (now["trailing"], now["claim"]) == (True, made[1])
