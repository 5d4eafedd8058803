"""Claim windows are timed from the call (the statement), not from the start
of the caller's transaction: a claim made late in a long transaction holds
its whole window, and a claim that expired after the transaction began is
expired for it. Time is made to pass by writing expiries between the
transaction's start and the call, or by a short ``pg_sleep`` inside it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime

import pytest
from django.db import connection, transaction

from astral_taskclaim import claim_task, claim_tasks, enqueue_claimed, enqueue_claimed_many
from astral_taskclaim.claims.claim import hold_task
from astral_taskclaim.queues.postgres import PostgresQueue
from tests.claimkit import (
    raw_connection,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

QUEUE = "statement-time"


@pytest.fixture
def queue() -> Iterator[PostgresQueue]:
    yield PostgresQueue("pg", options={"queue_name": QUEUE})
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [QUEUE])


def fetch_one(query: str, params: list[object] | None = None) -> object:
    with connection.cursor() as cursor:
        cursor.execute(query, params)
        row = cursor.fetchone()
    assert row is not None
    return row[0]


def transaction_start() -> datetime:
    """Begins the transaction (its first statement) and returns its start."""
    started = fetch_one("SELECT transaction_timestamp()")
    assert isinstance(started, datetime)
    return started


def sleep_in_transaction(seconds: float) -> None:
    fetch_one("SELECT pg_sleep(%s)", [seconds])


def expired_since(moment: datetime, key: str) -> None:
    """Writes, from another connection, a claim of ``key`` that expires a
    millisecond after ``moment`` (a live claim at that moment)."""
    with raw_connection() as other:
        other.execute(
            """INSERT INTO taskclaim.claim (key, expires_at, token)
               VALUES (%s, %s::timestamptz + interval '1 millisecond', gen_random_uuid())""",
            [key, moment],
        )


def claim_lengths() -> dict[str, float]:
    """Key → seconds from its claim's expiry back to this transaction's start."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT key, extract(epoch FROM expires_at - transaction_timestamp())::float8
               FROM taskclaim.claim"""
        )
        return dict(cursor.fetchall())


def test_enqueue_late_in_a_transaction_holds_its_whole_window(queue: PostgresQueue) -> None:
    # The transaction is older than the window when the enqueue runs: timed
    # from the transaction's start, the claim would be over before it commits.
    with transaction.atomic():
        transaction_start()
        sleep_in_transaction(1.1)
        assert enqueue_claimed(queue, "k", {"n": 1}, window_seconds=1.0) is not None
    assert enqueue_claimed(queue, "k", {"n": 2}, window_seconds=1.0) is None
    with connection.cursor() as cursor:
        # The message is written by the same statement as the claim, so its
        # enqueued_at is that statement's time: exactly one window before.
        cursor.execute(
            """SELECT extract(epoch FROM c.expires_at - m.enqueued_at)::float8, count(*) OVER ()
               FROM taskclaim.claim AS c, taskclaim.message AS m
               WHERE c.key = 'k' AND m.queue = %s""",
            [QUEUE],
        )
        assert cursor.fetchall() == [(1.0, 1)]


Call = Callable[[PostgresQueue, str], object]

CALLS: dict[str, Call] = {
    "claim_task": lambda queue, key: claim_task(key, window_seconds=5),
    "claim_tasks": lambda queue, key: claim_tasks([key, f"{key}:other"], window_seconds=5)[0],
    "enqueue_claimed": lambda queue, key: enqueue_claimed(queue, key, {}, window_seconds=5),
    "enqueue_claimed_many": lambda queue, key: enqueue_claimed_many(
        queue, [(key, {}), (f"{key}:other", {})], window_seconds=5
    )[0],
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_a_claim_that_expired_after_the_transaction_began_is_expired(
    call: Call, queue: PostgresQueue
) -> None:
    with transaction.atomic():
        started = transaction_start()
        expired_since(started, "k")
        sleep_in_transaction(0.01)  # past the expiry
        assert call(queue, "k") is not None


def test_every_claim_write_times_its_window_from_the_call(queue: PostgresQueue) -> None:
    with transaction.atomic():
        transaction_start()
        sleep_in_transaction(0.2)
        claim_task("claim_task", window_seconds=5)
        claim_tasks(["claim_tasks"], window_seconds=5)
        enqueue_claimed(queue, "enqueue_claimed", {}, window_seconds=5)
        enqueue_claimed_many(queue, [("enqueue_claimed_many", {})], window_seconds=5)
        hold_task(
            "hold_task",
            "00000000-0000-4000-8000-000000000000",
            delay_seconds=1,
            window_seconds=4,
        )
        lengths = claim_lengths()
    assert sorted(lengths) == [
        "claim_task",
        "claim_tasks",
        "enqueue_claimed",
        "enqueue_claimed_many",
        "hold_task",
    ]
    short = {key: length for key, length in lengths.items() if length < 5.2}
    assert short == {}
