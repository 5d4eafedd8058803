"""Fuzzing the consumer and the producer with hypothesis.

- Message bodies of every shape and size through ``consume_claimed``: it
  never raises; a body that is not a claimed-task envelope (judged here by
  an oracle written from the TypeScript package's check, plus the key and
  window rules every claim function applies) is acked and logged as
  ``queue.message_malformed``; the claim table is left exactly as it was,
  even when a malformed body names a live claim and its token.
- The same through the PostgreSQL queue and a worker, bodies stored as
  the producer wrote them: the worker never dies and the queue drains.
- Task payloads of every JSON shape through ``enqueue_claimed`` and back
  out of the queue (PostgreSQL, the local Cloudflare server, moto's SQS):
  the task ``run`` receives equals the one enqueued.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.consumer.consume import consume_claimed
from astral_taskclaim.core.envelope import encode_json
from astral_taskclaim.queues.base import BaseQueue
from astral_taskclaim.queues.cloudflare import CloudflareQueue
from astral_taskclaim.queues.messages import MessageBatch, ReceivedMessage
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.queues.sqs import SQSQueue
from tests.claimkit import insert_claim
from tests.queues.cloudflare_server import CloudflareQueuesServer, StoredMessage
from tests.queues.servers import MotoSQS
from tests.reliability.support import (
    LIVE_KEYS,
    EventLog,
    drain,
    is_envelope,
    record_figures,
    sized,
    table_snapshot,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_tables")]


def fuzz(examples: int) -> settings:
    """Hypothesis settings for ``examples`` cases of a database-backed check."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        database=None,
    )


# Live claims the fuzzed bodies can name, with their real tokens.


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
# What a producer can store in a field: any JSON value, numbers too big for
# a double, odd strings. A decoder can also hand over NaN and Infinity
# (Python's json reads them), which no producer may send.
stored_values = (
    json_values
    | st.integers(min_value=-(2**1100), max_value=2**1100)
    | st.sampled_from(
        ["", "\x00", "x" * 1024, "x" * 1025, "x" * 5000, "ABCDEF00-0000-4000-8000-000000000000\n"]
    )
)
field_values = stored_values | st.floats()


@st.composite
def envelope_like(
    draw: st.DrawFn, tokens: list[str], fields: st.SearchStrategy[Any] = field_values
) -> dict[str, Any]:
    """A dict with some, all or none of the envelope's fields, right or wrong."""
    body: dict[str, Any] = draw(st.dictionaries(st.text(max_size=6), json_values, max_size=2))
    if draw(st.booleans()):
        body["key"] = draw(st.sampled_from(LIVE_KEYS) | fields)
    if draw(st.booleans()):
        body["claim"] = draw(
            st.sampled_from(tokens)
            | st.uuids().map(str)
            | st.uuids().map(lambda u: str(u).upper())
            | fields
        )
    if draw(st.booleans()):
        body["windowSeconds"] = draw(
            st.sampled_from([0, 300, 0.5, -1, -0.0, 10**11, 10**11 + 1, 1e300]) | fields
        )
    if draw(st.booleans()):
        body["task"] = draw(json_values)
    return body


@pytest.fixture
def live_tokens() -> list[str]:
    return [insert_claim(key, seconds=600) for key in LIVE_KEYS]


def test_consume_claimed_survives_any_body_and_touches_no_claim(
    live_tokens: list[str], event_log: EventLog
) -> None:
    examples = sized(150, 3000)
    before = table_snapshot()
    cases: list[int] = []

    @fuzz(examples)
    @given(st.lists(json_values | envelope_like(live_tokens) | field_values, max_size=6))
    def check(bodies: list[Any]) -> None:
        cases.append(len(bodies))
        malformed_before = len(event_log.events("queue.message_malformed"))
        messages = [ReceivedMessage(body=b, attempts=1, receipt=None) for b in bodies]
        ran: list[Any] = []
        summary = consume_claimed(
            MessageBatch("fuzz", messages),
            parse=lambda task: ("parsed", task),
            run=ran.append,
            max_retries=3,
        )
        valid = [body for body in bodies if is_envelope(body)]
        assert [m.settlement for m in messages] == ["ack"] * len(bodies)
        assert ran == [("parsed", body.get("task")) for body in valid]
        assert summary.malformed == len(bodies) - len(valid)
        assert len(event_log.events("queue.message_malformed")) - malformed_before == (
            summary.malformed
        )
        assert table_snapshot() == before

    check()
    assert len(cases) >= examples // 2  # hypothesis ran the examples asked for
    record_figures("fuzz_consume", examples=len(cases), bodies=sum(cases))


@pytest.fixture
def fuzz_queue() -> Iterator[PostgresQueue]:
    queue = PostgresQueue("fuzz", options={"queue_name": f"fuzz-{uuid.uuid4().hex}"})
    yield queue
    queue.close()


def test_a_worker_survives_any_stored_body(
    fuzz_queue: PostgresQueue, live_tokens: list[str], event_log: EventLog
) -> None:
    before = table_snapshot()
    cases: list[int] = []

    @fuzz(sized(40, 600))
    @given(
        st.lists(json_values | envelope_like(live_tokens, stored_values), min_size=1, max_size=5)
    )
    def check(bodies: list[Any]) -> None:
        cases.append(len(bodies))
        with connection.cursor() as cursor:  # what a failed example may have left
            cursor.execute(
                "DELETE FROM taskclaim.message WHERE queue = %s", [fuzz_queue.queue_name]
            )
        for body in bodies:
            fuzz_queue.send(body)
        ran: list[Any] = []
        stats = drain(fuzz_queue, ran.append)
        valid = [body for body in bodies if is_envelope(body)]
        assert stats.received == len(bodies)
        assert (stats.ok, stats.malformed) == (len(valid), len(bodies) - len(valid))
        assert ran == [("parsed", body.get("task")) for body in valid]
        assert table_snapshot() == before  # the queue drained, no claim touched

    check()
    record_figures("fuzz_worker", examples=len(cases), bodies=sum(cases))


def test_a_deeply_nested_body_is_acked_as_malformed_not_a_crash(
    fuzz_queue: PostgresQueue, event_log: EventLog
) -> None:
    """Valid JSON that PostgreSQL stores but Python's decoder cannot nest
    that deep (a body any producer, in any language, may write)."""
    deep = "[" * 10_000 + "]" * 10_000
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO taskclaim.message (queue, body) VALUES (%s, %s)",
            [fuzz_queue.queue_name, deep],
        )
    stats = drain(fuzz_queue, lambda task: None)
    assert (stats.received, stats.malformed) == (1, 1)
    assert len(event_log.events("queue.message_malformed")) == 1
    assert table_snapshot() == ([], [])


@pytest.mark.parametrize("backend", ["cloudflare", "sqs"])
def test_a_deeply_nested_body_from_a_remote_queue_is_acked_as_malformed(
    backend: str, cloudflare_server: CloudflareQueuesServer, moto_sqs: MotoSQS
) -> None:
    """The same body, put on a remote queue by another producer."""
    deep = "[" * 10_000 + "]" * 10_000
    consumer: BaseQueue
    if backend == "cloudflare":
        queue_id = cloudflare_server.create_queue()
        server_queue = cloudflare_server.queues[queue_id]
        server_queue.messages["deep"] = StoredMessage("deep", deep, "json", 0, 0.0)
        consumer = CloudflareQueue(
            "fuzz",
            options={
                "account_id": cloudflare_server.account_id,
                "queue_id": queue_id,
                "api_token": cloudflare_server.token,
                "base_url": cloudflare_server.base_url,
            },
        )
    else:
        url = moto_sqs.create_queue()
        moto_sqs.client().send_message(QueueUrl=url, MessageBody=deep)
        consumer = SQSQueue("fuzz", options=moto_sqs.options(url, wait_time_seconds=1))
    batch = consumer.receive(max_messages=1, wait_seconds=2)
    summary = consume_claimed(batch, parse=lambda t: t, run=lambda t: None, max_retries=0)
    assert summary.malformed == 1
    assert [m.settlement for m in batch.messages] == ["ack"]


def round_trip(producer: BaseQueue, consumer: BaseQueue, task: Any) -> None:
    key = f"trip:{uuid.uuid4().hex}"
    token = enqueue_claimed(producer, key, task, window_seconds=60)
    assert token is not None
    ran: list[Any] = []
    for _ in range(5):  # a remote queue may take more than one receive
        batch = consumer.receive(max_messages=10, wait_seconds=1)
        consume_claimed(batch, parse=lambda t: ("parsed", t), run=ran.append, max_retries=0)
        consumer.settle(batch.messages)
        if ran:
            break
    # As JSON.stringify writes it: a whole float (1e16) comes back an int.
    assert ran == [("parsed", json.loads(encode_json(task, name="task")))]


def test_any_task_payload_comes_back_as_enqueued(fuzz_queue: PostgresQueue) -> None:
    cases: list[Any] = []

    @fuzz(sized(60, 1000))
    @given(json_values | st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
    def check(task: Any) -> None:
        cases.append(task)
        round_trip(fuzz_queue, fuzz_queue, task)

    check()
    record_figures("fuzz_round_trip", payloads=len(cases))


def test_payloads_come_back_through_cloudflare_and_sqs(
    cloudflare_server: CloudflareQueuesServer, moto_sqs: MotoSQS
) -> None:
    options = {
        "account_id": cloudflare_server.account_id,
        "queue_id": cloudflare_server.create_queue(),
        "api_token": cloudflare_server.token,
        "base_url": cloudflare_server.base_url,
        "poll_interval": 0.05,
    }
    cloudflare = CloudflareQueue("fuzz", options=options)
    sqs = SQSQueue("fuzz", options=moto_sqs.options(moto_sqs.create_queue(), wait_time_seconds=1))
    cases: list[Any] = []

    @fuzz(sized(15, 200))
    @given(json_values | st.text(alphabet=st.characters(codec="utf-8"), max_size=100))
    def check(task: Any) -> None:
        cases.append(task)
        round_trip(cloudflare, cloudflare, task)
        round_trip(sqs, sqs, task)

    check()
    record_figures("fuzz_remote_round_trip", payloads=len(cases), backends=2)
