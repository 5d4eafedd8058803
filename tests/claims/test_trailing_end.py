"""A trailing run's kept claim ends with its run (LeaseKeeper.end_run,
taskclaim/end_run.sql): the key's pending follow-up starts then, not when
the kept claim would have run out."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from django.db import OperationalError, connection

from astral_taskclaim import enqueue_claimed
from astral_taskclaim.consumer.consume import consume_claimed
from astral_taskclaim.queues import ReceivedMessage
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks import TaskRegistry
from astral_taskclaim.worker import leases
from astral_taskclaim.worker.leases import LeaseKeeper
from astral_taskclaim.worker.loop import Worker
from tests.claimkit import claims, end_claim_in
from tests.claims.trailingkit import QUEUE, queued
from tests.eventkit import EventWaiter

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


def kept_run(queue: PostgresQueue, *, trailing: bool = True) -> tuple[ReceivedMessage, LeaseKeeper]:
    """A 30 s window's run, received, whose claim a beat of its keeper kept
    (it was about to end), with a follow-up pending; the keeper stopped."""
    enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=30, trailing=trailing or None)
    [message] = queue.receive(max_messages=10).messages
    if trailing:
        enqueue_claimed(queue, "doc:1", {"v": 2}, window_seconds=30, trailing=True)
    end_claim_in("doc:1", 0.05)
    with (
        EventWaiter("worker.claims_kept") as kept,
        LeaseKeeper(queue, [message], lease_seconds=None, claims="default") as keeper,
    ):
        assert kept.wait(30)
    assert kept.records[0].kept == 1  # type: ignore[attr-defined]
    assert 25 < claims()["doc:1"][1] <= 30
    return message, keeper


def test_a_run_longer_than_its_window_frees_its_key_and_its_follow_up_is_due_now(
    queue: PostgresQueue,
) -> None:
    message, keeper = kept_run(queue)
    message.ack()
    message.claimed_at = time.monotonic() - 31.0
    keeper.end_run(message)
    queue.settle([message])
    assert claims()["doc:1"][1] <= 0
    [(body, wait)] = queued()
    assert body["followUp"] is True
    assert wait <= 0
    ran: list[Any] = []
    batch = queue.receive(max_messages=10)
    consume_claimed(batch, parse=lambda task: task, run=ran.append, max_retries=0)
    queue.settle(batch.messages)
    assert ran == [{"v": 2}]


def test_a_run_shorter_than_its_window_keeps_its_window(queue: PostgresQueue) -> None:
    message, keeper = kept_run(queue)
    message.ack()
    message.claimed_at = time.monotonic() - 10.0
    keeper.end_run(message)
    left = claims()["doc:1"][1]
    assert 15 < left <= 20
    [_, (body, wait)] = queued()
    assert body["followUp"] is True
    assert 15 < wait <= 20  # due when the claim ends, not when the kept one would have


def test_a_plain_claims_window_and_another_tokens_claim_are_untouched(
    queue: PostgresQueue,
) -> None:
    message, keeper = kept_run(queue, trailing=False)
    message.ack()
    message.claimed_at = time.monotonic() - 31.0
    keeper.end_run(message)
    assert 25 < claims()["doc:1"][1] <= 30  # at most once per window

    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [QUEUE])
        cursor.execute("TRUNCATE taskclaim.claim, taskclaim.follow_up")
    message, keeper = kept_run(queue)
    other = str(uuid.uuid4())
    with connection.cursor() as cursor:
        cursor.execute("UPDATE taskclaim.claim SET token = %s WHERE key = 'doc:1'", [other])
    before = claims()["doc:1"]
    message.ack()
    message.claimed_at = time.monotonic() - 31.0
    keeper.end_run(message)
    token, left = claims()["doc:1"]
    assert token == other
    assert before[1] - 1 < left <= before[1]
    assert queued()[-1][1] > 25  # the follow-up still waits


def test_a_failed_end_is_logged_and_the_run_still_settles(
    queue: PostgresQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    message, keeper = kept_run(queue)
    run = leases.statements.run

    def failing(alias: str, path: str, params: Any) -> Any:
        if path == "taskclaim/end_run.sql":
            raise OperationalError("the server went away")
        return run(alias, path, params)

    monkeypatch.setattr(leases.statements, "run", failing)
    message.ack()
    with EventWaiter("queue.claim_end_failed") as failed:
        message.claimed_at = time.monotonic() - 31.0
        keeper.end_run(message)
    assert len(failed.records) == 1
    assert "the server went away" in failed.records[0].getMessage()
    queue.settle([message])
    assert [body.get("followUp") for body, _ in queued()] == [True]  # the run's own: acked
    assert 25 < claims()["doc:1"][1] <= 30  # runs out as before


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_workers_trailing_run_past_its_window_is_followed_at_once(
    queue: PostgresQueue, concurrency: int
) -> None:
    ran: list[int] = []
    keeping = EventWaiter("worker.claims_kept")

    def run(task: dict[str, int]) -> None:
        ran.append(task["v"])
        if task["v"] == 1:  # a trigger while it runs; it outlives its window
            enqueue_claimed(queue, "doc:1", {"v": 2}, window_seconds=0.6, trailing=True)
            while sum(r.kept for r in keeping.records) < 3:  # type: ignore[attr-defined]
                keeping._seen.clear()
                assert keeping.wait(30)

    task = TaskRegistry().task(queue=QUEUE, window_seconds=0.6, trailing=True)(run)
    enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=0.6, trailing=True)
    worker = Worker(QUEUE, task=task, backend=queue, concurrency=concurrency, wait=0, burst=True)
    with keeping:
        worker.run()
    if concurrency == 1:
        assert ran == [1, 2]  # the drain found the follow-up due, its key free
    else:  # the drain stopped receiving while the run went on
        assert claims()["doc:1"][1] <= 0  # ended with the run, not kept on
        [(body, wait)] = queued()
        assert (body["followUp"], ran) == (True, [1])
        assert wait <= 0
