"""What a task raises is its failed attempt (SystemExit and KeyboardInterrupt
too); a message delivered past its attempts without settling is given up."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from astral_taskclaim import claim_task, consume_claimed, signals
from astral_taskclaim.consumer.failures import DeliveriesExhausted, is_task_failure
from astral_taskclaim.queues.messages import MessageBatch, ReceivedMessage
from tests.claimkit import claims

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
