"""PostgresQueue: the table, sending, leases, settling and delays."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable

import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.queues import ReceivedMessage
from astral_taskclaim.queues.postgres import PostgresQueue
from tests.claimkit import claims

from .pgqueue import TS_ENVELOPE, MakeQueue, expire, rescanning_plans, rows

pytestmark = pytest.mark.django_db(transaction=True)


def test_send_keeps_the_envelope_bytes_and_receive_decodes_them(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.send(json.loads(TS_ENVELOPE))
    assert [row["body"] for row in rows(queue)] == [TS_ENVELOPE]
    batch = queue.receive(max_messages=10)
    assert batch.queue == "pg"
    [message] = batch.messages
    assert message.body == json.loads(TS_ENVELOPE)
    assert list(message.body) == ["key", "claim", "windowSeconds", "task"]
    assert message.attempts == 1
    assert message.id == str(rows(queue)[0]["id"])


def test_a_row_written_by_another_producer_is_received(make_queue: MakeQueue) -> None:
    queue = make_queue()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO taskclaim.message (queue, body) VALUES (%s, %s)",
            [queue.queue_name, TS_ENVELOPE],
        )
    [message] = queue.receive(max_messages=1).messages
    assert message.body == json.loads(TS_ENVELOPE)


def test_json_nested_deeper_than_python_decodes_arrives_as_text(make_queue: MakeQueue) -> None:
    queue = make_queue()
    deep = "[" * 10_000 + "]" * 10_000
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO taskclaim.message (queue, body) VALUES (%s, %s)", [queue.queue_name, deep]
        )
    [message] = queue.receive(max_messages=1).messages
    assert message.body == deep  # consume_claimed acks it as malformed


def test_the_table_refuses_a_body_that_is_not_json(make_queue: MakeQueue) -> None:
    queue = make_queue()
    with pytest.raises(DatabaseError, match="json"), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO taskclaim.message (queue, body) VALUES (%s, %s)",
            [queue.queue_name, "{not json"],
        )


def test_receive_leases_oldest_first_and_hides_leased_messages(make_queue: MakeQueue) -> None:
    queue = make_queue(visibility_timeout=600)
    for n in range(5):
        queue.send({"n": n})
    first = queue.receive(max_messages=3).messages
    assert [m.body["n"] for m in first] == [0, 1, 2]
    second = queue.receive(max_messages=10).messages
    assert [m.body["n"] for m in second] == [3, 4]
    assert queue.receive(max_messages=10).messages == []
    leased = rows(queue)
    assert all(599 < row["due_in"] <= 600 for row in leased)
    assert len({row["lease"] for row in leased}) == 2  # one lease per receive


def test_receive_leases_no_more_than_asked_whatever_the_plan(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.send_many([{"n": n} for n in range(7)])
    with rescanning_plans():
        batch = queue.receive(max_messages=3)
    assert [m.body["n"] for m in batch.messages] == [0, 1, 2]
    assert [row["lease"] is not None for row in rows(queue)] == [True] * 3 + [False] * 4


def test_an_expired_lease_is_delivered_again_with_one_more_attempt(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.send({"n": 1})
    [first] = queue.receive(max_messages=1).messages
    expire(queue)  # the consumer died: nothing settled it
    [again] = queue.receive(max_messages=1).messages
    assert (again.id, again.body, again.attempts) == (first.id, {"n": 1}, 2)
    again.ack()
    queue.settle([again])
    assert rows(queue) == []


def test_concurrent_consumers_never_receive_the_same_message(make_queue: MakeQueue) -> None:
    queue = make_queue(visibility_timeout=600)
    for start in range(0, 300, 100):
        queue.send_many([{"n": n} for n in range(start, start + 100)])
    seen: list[list[int]] = [[] for _ in range(4)]
    errors: list[BaseException] = []

    def consume(index: int) -> None:
        own = PostgresQueue("pg", options={"queue_name": queue.queue_name})
        try:
            while batch := own.receive(max_messages=7).messages:
                seen[index].extend(m.body["n"] for m in batch)
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    delivered = [n for part in seen for n in part]
    assert sorted(delivered) == list(range(300))  # each exactly once


def test_ack_deletes_and_retry_delays(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.send_many([{"n": 1}, {"n": 2}])
    one, two = queue.receive(max_messages=2).messages
    one.ack()
    two.retry(delay_seconds=120)
    queue.settle([one, two])
    [left] = rows(queue)
    assert left["id"] == int(two.id)
    assert left["lease"] is None
    assert 119 < left["due_in"] <= 120
    assert queue.receive(max_messages=10).messages == []  # not before its delay
    expire(queue)
    [again] = queue.receive(max_messages=10).messages
    assert (again.body, again.attempts) == ({"n": 2}, 2)


def test_a_hand_back_is_visible_at_once_and_not_an_attempt(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.send_many([{"n": 1}, {"n": 2}])
    one, two = queue.receive(max_messages=2).messages
    one.hand_back()  # never ran: a stop, a database error
    two.retry(delay_seconds=0)  # ran and failed: an attempt
    queue.settle([one, two])
    again = queue.receive(max_messages=2).messages
    assert [(m.body, m.attempts) for m in again] == [({"n": 1}, 1), ({"n": 2}, 2)]


def test_unsettled_messages_keep_their_lease(make_queue: MakeQueue) -> None:
    queue = make_queue(visibility_timeout=600)
    queue.send({"n": 1})
    [message] = queue.receive(max_messages=1).messages
    queue.settle([message])  # no decision recorded
    [row] = rows(queue)
    assert row["lease"] is not None
    assert row["due_in"] > 590


@pytest.mark.parametrize("size", [4, 60])
def test_settling_costs_the_same_statements_whatever_the_batch_size(
    make_queue: MakeQueue, size: int
) -> None:
    queue = make_queue()
    queue.send_many([{"n": n} for n in range(size)])
    messages = queue.receive(max_messages=size).messages
    for n, message in enumerate(messages):
        message.ack() if n % 2 else message.retry(delay_seconds=0 if n % 4 else 30)
    with CaptureQueriesContext(connection) as queries:
        queue.settle(messages)
    # One statement: acks, retries, one NOTIFY for the retries due now.
    assert len(queries.captured_queries) == 1
    assert len(rows(queue)) == size // 2


def test_a_settlement_after_the_lease_was_taken_again_is_skipped(
    make_queue: MakeQueue, caplog: pytest.LogCaptureFixture
) -> None:
    queue = make_queue()
    queue.send({"n": 1})
    [late] = queue.receive(max_messages=1).messages
    expire(queue)
    [current] = queue.receive(max_messages=1).messages
    late.ack()
    with caplog.at_level(logging.WARNING, logger="astral_taskclaim"):
        queue.settle([late])
    assert len(rows(queue)) == 1  # the current delivery still owns it
    assert [r.event for r in caplog.records] == ["queue.settle_stale"]  # type: ignore[attr-defined]
    assert "raise visibility_timeout" in caplog.records[0].getMessage()
    current.ack()
    queue.settle([current])
    assert rows(queue) == []


def test_send_joins_the_callers_transaction(make_queue: MakeQueue) -> None:
    queue = make_queue()
    assert queue.transactional is True

    def send_then_fail() -> None:
        with transaction.atomic():
            queue.send({"n": 1})
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError):
        send_then_fail()
    assert rows(queue) == []
    with transaction.atomic():
        queue.send({"n": 2})
    assert [json.loads(row["body"]) for row in rows(queue)] == [{"n": 2}]


@pytest.mark.usefixtures("empty_claims")
def test_enqueue_claimed_in_a_transaction_commits_claim_and_message_together(
    make_queue: MakeQueue,
) -> None:
    queue = make_queue()

    def enqueue_then_fail() -> None:
        with transaction.atomic():
            assert enqueue_claimed(queue, "room:1", {"id": 1}, window_seconds=60)
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError):
        enqueue_then_fail()
    assert (claims(), rows(queue)) == ({}, [])
    with transaction.atomic():
        token = enqueue_claimed(queue, "room:1", {"id": 1}, window_seconds=60)
    assert claims()["room:1"][0] == token
    assert json.loads(rows(queue)[0]["body"])["claim"] == token


def test_send_delay_hides_the_message(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.send({"n": 1}, delay_seconds=300)
    assert queue.receive(max_messages=1).messages == []
    assert 299 < rows(queue)[0]["due_in"] <= 300


def test_send_many_is_one_ordered_statement(make_queue: MakeQueue) -> None:
    queue = make_queue()
    with CaptureQueriesContext(connection) as queries:
        queue.send_many([{"n": n} for n in range(100)])
    assert len(queries.captured_queries) == 1
    assert [m.body["n"] for m in queue.receive(max_messages=100).messages] == list(range(100))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda q: q.send({"n": 1}, delay_seconds=-1), ValueError, "delay_seconds"),
        (lambda q: q.send({"n": 1}, delay_seconds=43_201), ValueError, "delay_seconds"),
        (lambda q: q.send({"n": 1}, delay_seconds=True), TypeError, "delay_seconds"),
        (lambda q: q.send({"n": float("nan")}), TypeError, "not JSON-serialisable"),
        (lambda q: q.send({"n": object()}), TypeError, "not JSON-serialisable"),
        (lambda q: q.send("x" * 200_000), ValueError, "byte limit"),
        (lambda q: q.send_many([{"n": 1}, {1j}]), TypeError, "not JSON-serialisable"),
        (lambda q: q.send_many([{"n": n} for n in range(101)]), ValueError, "batch limit"),
        (lambda q: q.receive(max_messages=0), ValueError, "max_messages"),
        (lambda q: q.receive(max_messages=101), ValueError, "max_messages"),
        (lambda q: q.receive(max_messages=True), TypeError, "max_messages"),
        (lambda q: q.receive(max_messages=1, wait_seconds=-1), ValueError, "wait_seconds"),
    ],
)
def test_bad_arguments_raise_before_anything_is_written(
    make_queue: MakeQueue, call: Callable[[PostgresQueue], object], error: type, match: str
) -> None:
    queue = make_queue()
    with pytest.raises(error, match=match):
        call(queue)
    assert rows(queue) == []


def test_settle_refuses_messages_of_another_backend(make_queue: MakeQueue) -> None:
    message = ReceivedMessage(body={}, attempts=1, receipt="lease-id", id="x")
    message.ack()
    with pytest.raises(ValueError, match="not received from a PostgresQueue"):
        make_queue().settle([message])
