"""Trailing runs (enqueue_claimed(trailing=...)): a trigger on a claimed key
becomes the key's one pending follow-up run, run when the claim ends."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.db import connection, connections, transaction

from astral_taskclaim import Debounce, aenqueue_claimed, enqueue_claimed, enqueue_claimed_many
from astral_taskclaim.claims.trailing import Enqueued, take_follow_up
from astral_taskclaim.consumer.consume import consume_claimed
from astral_taskclaim.consumer.summary import ConsumeSummary
from astral_taskclaim.core.envelope import Envelope
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks import TaskRegistry
from astral_taskclaim.testing import backend_pid, hold_transaction
from tests.claimkit import blocking_pids, claims, insert_claim, until
from tests.claims.trailingkit import QUEUE, queued
from tests.eventkit import EventWaiter

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


def follow_ups() -> list[tuple[str, str, Any, bool]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key, token::text, task, taken_at IS NOT NULL FROM taskclaim.follow_up "
            "ORDER BY created_at"
        )
        return [(key, token, json.loads(task), taken) for key, token, task, taken in cursor]


def make_visible() -> None:
    with connection.cursor() as cursor:
        cursor.execute("UPDATE taskclaim.message SET visible_at = now() WHERE queue = %s", [QUEUE])


def expire(key: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE taskclaim.claim SET expires_at = now() - interval '1 second' WHERE key = %s",
            [key],
        )


def consume(queue: PostgresQueue, ran: list[Any]) -> ConsumeSummary:
    batch = queue.receive(max_messages=10)
    summary = consume_claimed(batch, parse=lambda task: task, run=ran.append, max_retries=2)
    queue.settle(batch.messages)
    return summary


def test_a_free_key_is_sent_now_and_marked_trailing(queue: PostgresQueue) -> None:
    sent = enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing="latest")
    assert isinstance(sent, Enqueued)
    assert sent.outcome == "sent"
    assert claims()["doc:1"][0] == sent
    [(body, _)] = queued()
    assert body == {
        "key": "doc:1",
        "claim": sent,
        "windowSeconds": 60,
        "task": {"v": 1},
        "trailing": True,
    }


@pytest.mark.parametrize(("mode", "runs"), [("latest", {"v": 3}), ("first", {"v": 2})])
def test_triggers_on_a_claimed_key_become_one_follow_up(
    queue: PostgresQueue, mode: str, runs: dict[str, int]
) -> None:
    first = enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing=mode)  # type: ignore[arg-type]
    second = enqueue_claimed(queue, "doc:1", {"v": 2}, window_seconds=60, trailing=mode)  # type: ignore[arg-type]
    third = enqueue_claimed(queue, "doc:1", {"v": 3}, window_seconds=60, trailing=mode)  # type: ignore[arg-type]
    assert isinstance(second, Enqueued)
    assert isinstance(third, Enqueued)
    assert (second.outcome, third.outcome) == ("follow_up_created", "merged")
    assert second == third != first
    [(_now_body, _), (later_body, wait)] = queued()
    assert later_body["followUp"] is True
    assert later_body["claim"] == second
    assert 55 < wait <= 60  # due when the first claim ends
    [(key, token, task, taken)] = follow_ups()
    assert (key, token, task, taken) == ("doc:1", second, runs, False)


def test_the_follow_up_waits_for_the_claim_then_runs_the_latest_task(queue: PostgresQueue) -> None:
    first = enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing=True)
    pending = enqueue_claimed(queue, "doc:1", {"v": 2}, window_seconds=60, trailing=True)
    enqueue_claimed(queue, "doc:1", {"v": 3}, window_seconds=30, trailing=True)
    make_visible()
    ran: list[Any] = []
    summary = consume(queue, ran)
    # The first ran; its follow-up found the key held and was sent again.
    assert ran == [{"v": 1}]
    assert (summary.ok, summary.retried, summary.follow_up_waits) == (1, 1, 1)
    [(body, wait)] = queued()
    assert body["followUp"] is True
    assert 55 < wait <= 60
    assert claims()["doc:1"][0] == first
    expire("doc:1")
    make_visible()
    summary = consume(queue, ran)
    assert ran == [{"v": 1}, {"v": 3}]
    assert summary.ok == 1
    token, left = claims()["doc:1"]
    assert token == pending
    assert 25 < left <= 30
    assert follow_ups() == [("doc:1", pending, {"v": 3}, True)]


def test_a_send_now_supersedes_a_pending_follow_up(queue: PostgresQueue) -> None:
    enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing=True)
    enqueue_claimed(queue, "doc:1", {"v": 2}, window_seconds=60, trailing=True)
    expire("doc:1")
    again = enqueue_claimed(queue, "doc:1", {"v": 3}, window_seconds=60, trailing=True)
    assert isinstance(again, Enqueued)
    assert again.outcome == "sent"
    assert follow_ups() == []
    make_visible()
    ran: list[Any] = []
    summary = consume(queue, ran)
    # The follow-up, and the first send (its claim ran out in the queue and
    # the later send holds the key), are both carried by the later run.
    assert ran == [{"v": 3}]
    assert summary.superseded == 2


def test_a_trigger_during_a_follow_ups_run_starts_the_next(queue: PostgresQueue) -> None:
    enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing=True)
    pending = enqueue_claimed(queue, "doc:1", {"v": 2}, window_seconds=60, trailing=True)
    expire("doc:1")
    with connection.cursor() as cursor:  # only the follow-up's message is left
        cursor.execute("DELETE FROM taskclaim.message WHERE body NOT LIKE '%%followUp%%'")
    make_visible()
    later: list[Any] = []

    def run(task: Any) -> None:
        later.append(enqueue_claimed(queue, "doc:1", {"v": 9}, window_seconds=60, trailing=True))

    batch = queue.receive(max_messages=10)
    consume_claimed(batch, parse=lambda task: task, run=run, max_retries=0)
    queue.settle(batch.messages)
    [next_one] = later
    assert isinstance(next_one, Enqueued)
    assert next_one.outcome == "follow_up_created"
    assert next_one != pending
    assert [(t, taken) for _, t, _, taken in follow_ups()] == [(pending, True), (next_one, False)]


def test_a_remote_queue_sends_after_the_commit_and_a_failed_send_drops_the_follow_up() -> None:
    class Refusing(MemoryQueue):
        refuse = False

        def send(self, body: Any, *, delay_seconds: float = 0) -> None:
            if self.refuse:
                raise ConnectionError("the queue refused the message")
            super().send(body, delay_seconds=delay_seconds)

    queue = Refusing("remote", options={"queue_name": "trailing-remote"})
    insert_claim("doc:1", seconds=60)
    queue.refuse = True
    with pytest.raises(ConnectionError):
        enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing=True)
    assert follow_ups() == []
    queue.refuse = False
    made = enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing=True)
    assert isinstance(made, Enqueued)
    assert made.outcome == "follow_up_created"
    assert [token for _, token, _, _ in follow_ups()] == [made]


@pytest.mark.parametrize("bad", ["last", 1, "LATEST"])
def test_a_bad_trailing_mode_raises_before_anything_is_written(
    queue: PostgresQueue, bad: object
) -> None:
    with pytest.raises(ValueError, match="trailing must be"):
        enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing=bad)  # type: ignore[arg-type]
    assert claims() == {}
    assert queued() == []


def test_a_claimed_tasks_trailing_is_its_enqueues_default_and_a_call_overrides_it(
    queue: PostgresQueue,
) -> None:
    registry = TaskRegistry()
    task = registry.task(queue=QUEUE, window_seconds=60, trailing="first", name="t")(lambda t: None)
    assert task.trailing == "first"
    first = task.enqueue("doc:1", {"v": 1})
    assert isinstance(first, Enqueued)
    assert task.enqueue("doc:1", {"v": 2}).outcome == "follow_up_created"  # type: ignore[union-attr]
    assert task.enqueue("doc:1", {"v": 3}, trailing=False) is None
    assert [task for _, _, task, _ in follow_ups()] == [{"v": 2}]
    with pytest.raises(ValueError, match="trailing must be"):
        registry.task(queue=QUEUE, trailing="sometimes")(lambda t: None)


def test_the_async_and_bulk_forms_take_trailing(queue: PostgresQueue) -> None:
    sent = async_to_sync(aenqueue_claimed)(queue, "doc:1", 1, window_seconds=60, trailing=True)
    assert isinstance(sent, Enqueued)
    assert sent.outcome == "sent"
    tokens = enqueue_claimed_many(
        queue, [("doc:1", 2), ("doc:2", 3), ("doc:1", 4)], window_seconds=60, trailing="latest"
    )
    outcomes = [getattr(token, "outcome", None) for token in tokens]
    assert outcomes == ["follow_up_created", "sent", "merged"]
    assert [task for _, _, task, _ in follow_ups()] == [4]


def test_the_command_takes_trailing(queue: PostgresQueue) -> None:
    err = io.StringIO()
    call_command(
        "enqueue_claimed",
        QUEUE,
        "doc:1",
        "--task",
        "1",
        "--window",
        "60",
        "--trailing",
        "latest",
        stdout=io.StringIO(),
        stderr=err,
    )
    call_command(
        "enqueue_claimed",
        QUEUE,
        "doc:1",
        "--task",
        "2",
        "--window",
        "60",
        "--trailing",
        "latest",
        stdout=io.StringIO(),
        stderr=err,
    )
    assert "doc:1 is claimed: follow up created" in err.getvalue()
    assert [task for _, _, task, _ in follow_ups()] == [2]


def set_quiet_since(key: str, seconds_ago: float) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE taskclaim.follow_up SET updated_at = now() - make_interval(secs => %s) "
            "WHERE key = %s",
            [seconds_ago, key],
        )


def test_debounce_runs_once_the_key_is_quiet_with_the_latest_task(queue: PostgresQueue) -> None:
    debounce = Debounce(30)
    first = enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing=debounce)
    second = enqueue_claimed(queue, "doc:1", {"v": 2}, window_seconds=60, trailing=debounce)
    assert isinstance(first, Enqueued)
    assert (first.outcome, getattr(second, "outcome", None)) == ("follow_up_created", "merged")
    assert first == second
    assert claims() == {}  # a free key is not claimed: nothing runs at once
    [(body, wait)] = queued()
    assert body["followUp"] is True
    assert 25 < wait <= 30
    make_visible()
    ran: list[Any] = []
    summary = consume(queue, ran)  # not quiet yet: it waits again
    assert ran == []
    assert summary.follow_up_waits == 1
    [(_, wait)] = queued()
    assert 25 < wait <= 30
    set_quiet_since("doc:1", 31)
    make_visible()
    consume(queue, ran)
    assert ran == [{"v": 2}]
    assert claims()["doc:1"][0] == first  # and the window holds from its start


def test_debounce_runs_no_later_than_its_maximum_wait(queue: PostgresQueue) -> None:
    debounce = Debounce(30, max_wait_seconds=45, keep="first")
    enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing=debounce)
    enqueue_claimed(queue, "doc:1", {"v": 2}, window_seconds=60, trailing=debounce)
    with connection.cursor() as cursor:  # the burst began 46 s ago, the last trigger just now
        cursor.execute(
            "UPDATE taskclaim.follow_up SET created_at = now() - interval '46 seconds' "
            "WHERE key = 'doc:1'"
        )
    make_visible()
    ran: list[Any] = []
    consume(queue, ran)
    assert ran == [{"v": 1}]


@pytest.mark.parametrize(
    ("arguments", "culprit"),
    [
        ((0,), "Debounce seconds"),
        ((5, -1), "max_wait_seconds"),
        ((5, None, "last"), "keep"),
        ((1e11 + 1,), "Debounce seconds"),
        ((5, 1e11 + 1), "max_wait_seconds"),
        ((30, 29.5), "max_wait_seconds"),
    ],
)
def test_a_bad_debounce_names_its_culprit(arguments: tuple[Any, ...], culprit: str) -> None:
    with pytest.raises(ValueError, match=culprit):
        Debounce(*arguments)


def test_debounce_takes_its_limits() -> None:
    assert Debounce(1e11, max_wait_seconds=1e11).max_wait_seconds == 1e11
    assert Debounce(30, max_wait_seconds=30).max_wait_seconds == 30


def test_a_follow_up_row_that_is_not_json_is_unparseable_not_a_stuck_worker(
    queue: PostgresQueue,
) -> None:
    enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing=True)
    enqueue_claimed(queue, "doc:1", {"v": 2}, window_seconds=60, trailing=True)
    expire("doc:1")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE taskclaim.follow_up SET task = '{not json'")
        cursor.execute("DELETE FROM taskclaim.message WHERE body NOT LIKE '%%followUp%%'")
    make_visible()
    ran: list[Any] = []
    summary = consume(queue, ran)
    assert ran == []
    assert summary.unparseable == 1
    assert queued() == []
    assert "doc:1" not in claims()  # released


def test_a_sent_message_whose_claim_ran_out_and_was_retaken_is_superseded(
    queue: PostgresQueue,
) -> None:
    enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing=True)
    expire("doc:1")  # it waited in a backlog past its window
    later = enqueue_claimed(queue, "doc:1", {"v": 2}, window_seconds=60, trailing=True)
    assert getattr(later, "outcome", None) == "sent"
    make_visible()
    ran: list[Any] = []
    summary = consume(queue, ran)
    assert ran == [{"v": 2}]  # not both: the later claim's run carries the first trigger
    assert summary.superseded == 1
    assert claims()["doc:1"][0] == later


def test_a_sent_message_whose_claim_ran_out_unretaken_runs_and_holds_its_key(
    queue: PostgresQueue,
) -> None:
    sent = enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing=True)
    expire("doc:1")
    ran: list[Any] = []
    consume(queue, ran)
    assert ran == [{"v": 1}]
    token, left = claims()["doc:1"]
    assert token == sent
    assert 55 < left <= 60  # a window from the run's start


def test_a_trigger_merging_as_its_follow_up_is_delivered_pushes_it_back(
    queue: PostgresQueue,
) -> None:
    debounce = Debounce(30)
    pending = enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing=debounce)
    set_quiet_since("doc:1", 31)  # due: its delivery would run it now

    def merge(hold: Callable[[], None]) -> None:
        with transaction.atomic():
            enqueue_claimed(queue, "doc:1", {"v": 2}, window_seconds=60, trailing=debounce)
            hold()  # the merge's push back, not yet committed

    delivering: Future[int] = Future()
    delivered: Future[Envelope | float | str | None] = Future()

    def deliver() -> None:
        try:
            delivering.set_result(backend_pid())
            delivered.set_result(
                take_follow_up("default", Envelope("doc:1", str(pending), 60, None))
            )
        finally:
            connections.close_all()

    with hold_transaction(merge) as held:
        thread = threading.Thread(target=deliver)
        thread.start()
        until(lambda: held.holder in blocking_pids(delivering.result()))  # it waits for the merge
        assert not delivered.done()
    thread.join()
    wait = delivered.result()
    assert isinstance(wait, float)  # pushed back: it waits, it does not run
    assert 25 < wait <= 30
    assert claims() == {}
    assert [(task, taken) for _, _, task, taken in follow_ups()] == [({"v": 2}, False)]


@pytest.mark.parametrize(
    ("column", "value"),
    [("window_seconds", "NaN"), ("window_seconds", "Infinity"), ("debounce_seconds", "Infinity")],
)
def test_a_follow_up_that_cannot_run_is_dropped_and_its_message_acked_as_malformed(
    queue: PostgresQueue, column: str, value: str
) -> None:
    trailing = Debounce(30) if column == "debounce_seconds" else "latest"
    enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing=trailing)
    enqueue_claimed(queue, "doc:1", {"v": 2}, window_seconds=60, trailing=trailing)
    expire("doc:1")
    with connection.cursor() as cursor:  # written by hand
        cursor.execute(f"UPDATE taskclaim.follow_up SET {column} = %s::float8", [value])
        cursor.execute("DELETE FROM taskclaim.message WHERE body NOT LIKE '%%followUp%%'")
    enqueue_claimed(queue, "doc:2", {"v": 3}, window_seconds=60, trailing=trailing)
    set_quiet_since("doc:2", 31)
    make_visible()
    ran: list[Any] = []
    with EventWaiter("queue.message_malformed") as logged:
        summary = consume(queue, ran)
    assert ran == [{"v": 3}]  # the batch's other message still ran
    assert (summary.malformed, summary.ok) == (1, 1)
    assert "doc:1" not in [key for key, _, _, _ in follow_ups()]  # the bad one is gone
    assert queued() == []
    assert len(logged.records) == 1


def test_a_delivery_as_a_send_now_supersedes_its_follow_up_cannot_deadlock(
    queue: PostgresQueue,
) -> None:
    enqueue_claimed(queue, "doc:1", {"v": 1}, window_seconds=60, trailing=True)
    pending = enqueue_claimed(queue, "doc:1", {"v": 2}, window_seconds=60, trailing=True)
    expire("doc:1")

    def send_now(hold: Callable[[], None]) -> None:
        # As trail.sql claims the free key, then drops the follow-up it supersedes.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT FROM taskclaim.claim WHERE key = 'doc:1' FOR UPDATE")
            hold()
            cursor.execute("DELETE FROM taskclaim.follow_up WHERE key = 'doc:1'")

    delivering: Future[int] = Future()
    delivered: Future[Envelope | float | str | None] = Future()

    def deliver() -> None:
        try:
            delivering.set_result(backend_pid())
            delivered.set_result(take_follow_up("default", Envelope("doc:1", str(pending), 60, 1)))
        except BaseException as error:
            delivered.set_exception(error)
        finally:
            connections.close_all()

    with hold_transaction(send_now) as held:
        thread = threading.Thread(target=deliver)
        thread.start()
        until(lambda: held.holder in blocking_pids(delivering.result()))
    thread.join()
    assert delivered.result() is None  # superseded, not a deadlock
