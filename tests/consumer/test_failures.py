"""What a task raises is its failed attempt (SystemExit and KeyboardInterrupt
too); a message delivered past its attempts without settling is given up."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection, transaction

from astral_taskclaim import claim_task, consume_claimed, signals
from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.consumer.failures import (
    DeliveriesExhausted,
    describe_error,
    is_task_failure,
)
from astral_taskclaim.queues.messages import MessageBatch, ReceivedMessage
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks import TaskRegistry
from astral_taskclaim.worker.loop import Worker
from tests.claimkit import claims
from tests.testapp.models import Room

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


@pytest.fixture
def worker_handlers() -> Iterator[None]:
    """SIGINT handled as a worker's handlers do (no KeyboardInterrupt)."""
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def delivery(key: str = "k", *, attempts: int = 1) -> ReceivedMessage:
    token = claim_task(key, window_seconds=300)
    assert token is not None
    body = {"key": key, "claim": token, "windowSeconds": 300, "task": {"id": 1}}
    return ReceivedMessage(body=body, attempts=attempts, receipt=None)


def consume(*messages: ReceivedMessage, run: Callable[[Any], object], max_retries: int = 1) -> Any:
    batch = MessageBatch(queue="jobs", messages=list(messages))
    return consume_claimed(batch, parse=lambda task: task, run=run, max_retries=max_retries)


def raiser(error: BaseException) -> Callable[[Any], None]:
    def run(task: Any) -> None:
        raise error

    return run


def exits(task: Any) -> None:
    sys.exit(3)


def builtin_exit(task: Any) -> None:
    exit()


def cancelled(task: Any) -> Any:
    async def run() -> None:
        raise asyncio.CancelledError

    return run()


RUNS = {
    "SystemExit": exits,
    "exit()": builtin_exit,
    "KeyboardInterrupt": raiser(KeyboardInterrupt()),
    "GeneratorExit": raiser(GeneratorExit()),
    "CancelledError": cancelled,
}


@pytest.mark.parametrize("run", RUNS.values(), ids=RUNS.keys())
@pytest.mark.usefixtures("worker_handlers")
def test_a_task_that_exits_or_interrupts_fails_its_attempt_and_the_batch_goes_on(
    run: Callable[[Any], object],
) -> None:
    done: list[str] = []
    retried, final, healthy = delivery("a"), delivery("b", attempts=2), delivery("c")

    def dispatch(task: Any) -> object:
        return run(task) if task["id"] != "ok" else done.append("ok")

    healthy.body["task"] = {"id": "ok"}
    summary = consume(retried, final, healthy, run=dispatch)
    assert (summary.retried, summary.failed, summary.ok) == (1, 1, 1)
    assert (retried.settlement, final.settlement, healthy.settlement) == ("retry", "ack", "ack")
    assert done == ["ok"]
    assert set(claims()) == {"a", "c"}  # the retry holds its claim, the last failure released


def test_a_ctrl_c_under_pythons_own_sigint_handler_propagates() -> None:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    delivered = delivery()
    with pytest.raises(KeyboardInterrupt):
        consume(delivered, run=raiser(KeyboardInterrupt()))
    assert delivered.settlement is None
    assert not is_task_failure(KeyboardInterrupt())


def test_a_keyboard_interrupt_outside_the_main_thread_is_the_tasks() -> None:
    seen: list[bool] = []
    thread = threading.Thread(target=lambda: seen.append(is_task_failure(KeyboardInterrupt())))
    thread.start()
    thread.join()
    assert seen == [True]


def test_past_its_attempts_an_unsettled_message_is_given_up_without_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="astral_taskclaim")
    ran: list[Any] = []
    gave_up: list[BaseException] = []

    def receiver(sender: Any, error: BaseException, **kwargs: Any) -> None:
        gave_up.append(error)

    signals.task_gave_up.connect(receiver)
    try:
        last, past = delivery("last", attempts=2), delivery("past", attempts=3)
        summary = consume(last, past, run=ran.append, max_retries=1)
    finally:
        signals.task_gave_up.disconnect(receiver)
    assert ran == [{"id": 1}]  # the last attempt runs; the one past it does not
    assert (summary.ok, summary.failed) == (1, 1)
    assert past.settlement == "ack"
    assert set(claims()) == {"last"}  # released
    [abandoned] = [r for r in caplog.records if getattr(r, "event", "") == "queue.task_abandoned"]
    assert abandoned.levelno == logging.ERROR
    assert "delivered 3 times" in abandoned.getMessage()
    assert [type(error) for error in gave_up] == [DeliveriesExhausted]


class _UnprintableError(Exception):
    def __init__(self, raises: BaseException) -> None:
        super().__init__()
        self.raises = raises

    def __str__(self) -> str:
        raise self.raises


@pytest.mark.parametrize(
    ("error", "described"),
    [
        (
            RuntimeError("bad \ud800 and \x00 text\nnext"),
            "RuntimeError: bad \\ud800 and \\x00 text\\nnext",
        ),
        (_UnprintableError(ValueError("no")), "_UnprintableError: <message not printable>"),
        (_UnprintableError(SystemExit(9)), "_UnprintableError: <message not printable>"),
        (ValueError(), "ValueError"),
    ],
)
def test_an_odd_exception_is_described_in_text_postgresql_and_a_log_line_hold(
    error: BaseException, described: str
) -> None:
    text = describe_error(error)

    assert text == described
    text.encode("utf-8")  # no lone surrogate left


def test_a_task_raising_odd_text_is_retried_and_its_batch_settles(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A NUL or a lone surrogate in last_error failed the whole batch's settle
    # statement; a __str__ raising SystemExit ended the worker.
    queue = PostgresQueue("jobs", options={"queue_name": f"odd-{uuid.uuid4().hex}"})
    errors: dict[int, BaseException] = {
        1: RuntimeError("bad \ud800 text"),
        2: RuntimeError("nul \x00 text"),
        3: _UnprintableError(SystemExit(9)),
    }

    def run(task: Any) -> None:
        if task["id"] in errors:
            raise errors[task["id"]]

    try:
        for id_ in (1, 2, 3, 4):
            assert enqueue_claimed(queue, f"odd:{id_}", {"id": id_}, window_seconds=300)
        task = TaskRegistry().task(queue="jobs", name="tests.odd", max_retries=1)(run)
        worker = Worker("jobs", task=task, backend=queue, burst=True, wait=0)
        worker.run()

        assert (worker.stats.ok, worker.stats.retried) == (1, 3)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT body::json->'task'->>'id', attempts, lease IS NULL, last_error"
                " FROM taskclaim.message WHERE queue = %s ORDER BY id",
                [queue.queue_name],
            )
            left = cursor.fetchall()
        assert left == [
            ("1", 1, True, "RuntimeError: bad \\ud800 text"),
            ("2", 1, True, "RuntimeError: nul \\x00 text"),
            ("3", 1, True, "_UnprintableError: <message not printable>"),
        ]
    finally:
        queue.close()
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [queue.queue_name])


def test_a_task_leaving_its_transaction_open_fails_and_the_batch_commits() -> None:
    # Left open, the transaction took in the claim writes and the settlement
    # of the rest of the batch, and was lost with the connection.
    queue = PostgresQueue("jobs", options={"queue_name": f"open-{uuid.uuid4().hex}"})

    def run(task: Any) -> None:
        if task["id"] == 1:
            transaction.set_autocommit(False)
        Room.objects.create(name=f"open-{task['id']}")

    try:
        for id_ in (1, 2, 3):
            assert enqueue_claimed(queue, f"open:{id_}", {"id": id_}, window_seconds=300)
        task = TaskRegistry().task(queue="jobs", name="tests.open", max_retries=1)(run)
        worker = Worker("jobs", task=task, backend=queue, burst=True, wait=0)
        worker.run()

        assert (worker.stats.ok, worker.stats.retried) == (2, 1)
        assert connection.get_autocommit()
        assert sorted(Room.objects.values_list("name", flat=True)) == ["open-2", "open-3"]
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT body::json->'task'->>'id', lease IS NULL, last_error"
                " FROM taskclaim.message WHERE queue = %s",
                [queue.queue_name],
            )
            assert cursor.fetchall() == [
                (
                    "1",
                    True,
                    "TransactionLeftOpen: the task left database connection 'default' in a "
                    "transaction (autocommit off, not committed); it was rolled back",
                )
            ]
        assert set(claims()) == {"open:1", "open:2", "open:3"}  # the retried one held
    finally:
        queue.close()
        Room.objects.filter(name__startswith="open-").delete()
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [queue.queue_name])
