"""The one event loop a process runs its ``async def`` tasks on."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from django.db import connections

from astral_taskclaim import claim_task, consume_claimed, signals
from astral_taskclaim.consumer.event_loop import _run_awaitable, event_loop_scope
from astral_taskclaim.queues.messages import MessageBatch, ReceivedMessage
from tests.testapp.models import Room

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


def delivered(key: str, task: Any) -> ReceivedMessage:
    token = claim_task(key, window_seconds=300)
    assert token is not None
    body = {"key": key, "claim": token, "windowSeconds": 300, "task": task}
    return ReceivedMessage(body=body, attempts=1, receipt=None)


def consume(run: Any, *messages: ReceivedMessage) -> Any:
    batch = MessageBatch(queue="refresh", messages=list(messages))
    return consume_claimed(batch, parse=lambda task: task, run=run, max_retries=3)


async def current_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


def test_every_run_shares_one_loop_until_the_last_scope_ends() -> None:
    with event_loop_scope():
        with event_loop_scope():
            first = _run_awaitable(current_loop())
        assert _run_awaitable(current_loop()) is first  # an inner scope's end keeps it
    assert first.is_closed()
    assert _run_awaitable(current_loop()) is not first  # started again on demand


def test_a_run_from_the_loop_itself_is_refused() -> None:
    async def nested() -> object:
        return _run_awaitable(current_loop())

    with pytest.raises(RuntimeError, match="from the event loop"):
        _run_awaitable(nested())


@pytest.mark.parametrize("error", [SystemExit(3), KeyboardInterrupt(), asyncio.CancelledError()])
def test_an_async_run_raising_a_base_exception_is_a_failed_attempt(error: BaseException) -> None:
    async def run(task: Any) -> None:
        raise error

    message = delivered("a", 1)
    result: list[Any] = []
    raised: list[BaseException] = []

    def on_retried(sender: Any, error: BaseException, **kwargs: Any) -> None:
        raised.append(error)

    signals.task_retried.connect(on_retried)

    # Off the main thread, as in a worker's lane: a KeyboardInterrupt is the task's.
    def in_lane() -> None:
        try:
            result.append(consume(run, message))
        finally:
            connections.close_all()

    thread = threading.Thread(target=in_lane)
    thread.start()
    thread.join(60)
    signals.task_retried.disconnect(on_retried)
    assert raised == [error]  # the run's own exception, as a sync run's would be
    assert result[0].retried == 1
    assert message.settlement == "retry"
    assert _run_awaitable(current_loop()).is_running()  # the loop survived it


def test_signals_come_in_the_order_of_a_sync_run() -> None:
    seen: list[str] = []

    def on(name: str) -> Any:
        def receiver(sender: Any, **kwargs: Any) -> None:
            seen.append(name)

        return receiver

    async def run(task: Any) -> None:
        seen.append("run")
        if task == "fail":
            raise ValueError("no")

    receivers = {
        signal: on(name)
        for signal, name in [
            (signals.task_started, "started"),
            (signals.task_finished, "finished"),
            (signals.task_retried, "retried"),
        ]
    }
    for signal, receiver in receivers.items():
        signal.connect(receiver)
    try:
        consume(run, delivered("a", "ok"), delivered("b", "fail"))
    finally:
        for signal, receiver in receivers.items():
            signal.disconnect(receiver)
    assert seen == ["started", "run", "finished", "started", "run", "retried"]


def test_an_async_failure_is_retried_after_its_retry_after() -> None:
    class Throttled(Exception):
        retry_after_ms = 120_000

    async def run(task: Any) -> None:
        raise Throttled()

    message = delivered("a", 1)
    batch = MessageBatch(queue="refresh", messages=[message])
    summary = consume_claimed(
        batch,
        parse=lambda task: task,
        run=run,
        max_retries=3,
        retry_after_ms=lambda error: getattr(error, "retry_after_ms", None),
    )
    assert summary.retry_delays == [120]
    assert message.settlement == "retry"


@pytest.mark.django_db
def test_in_a_test_case_an_async_run_sees_the_tests_transaction() -> None:
    Room.objects.create(name="seen")  # not committed: only the test's connection sees it
    found: list[bool] = []

    async def run(task: Any) -> None:
        found.append(await Room.objects.filter(name="seen").aexists())

    consume(run, delivered("a", 1))
    assert found == [True]
