"""The task signals consume_claimed sends around each run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.dispatch import Signal

from astral_taskclaim import claim_task, consume_claimed, signals
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.queues.messages import MessageBatch, ReceivedMessage
from astral_taskclaim.tasks import TaskRegistry
from astral_taskclaim.worker.loop import Worker
from tests.claimkit import claims

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

SIGNALS = {
    "started": signals.task_started,
    "finished": signals.task_finished,
    "retried": signals.task_retried,
    "gave_up": signals.task_gave_up,
}


class TaskError(Exception):
    pass


@pytest.fixture
def heard() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Every task signal received, as (name, keyword arguments incl. sender)."""
    received: list[tuple[str, dict[str, Any]]] = []
    receivers = {}
    for name, signal in SIGNALS.items():

        def receiver(signal: Signal, name: str = name, **kwargs: Any) -> None:
            received.append((name, kwargs))

        receivers[name] = receiver
        signal.connect(receiver)
    yield received
    for name, signal in SIGNALS.items():
        signal.disconnect(receivers[name])


def envelope(key: str) -> dict[str, Any]:
    token = claim_task(key, window_seconds=300)
    assert token is not None
    return {"key": key, "claim": token, "windowSeconds": 300, "task": {"id": key}}


def consume(body: Any, run: Any, *, attempts: int = 1, max_retries: int = 1) -> MessageBatch:
    batch = MessageBatch("refresh", [ReceivedMessage(body=body, attempts=attempts, receipt=None)])
    consume_claimed(batch, parse=lambda task: task, run=run, max_retries=max_retries)
    return batch


def fail(task: Any) -> None:
    raise TaskError("boom")


def test_a_run_that_returns_is_started_then_finished(heard: list[Any]) -> None:
    body = envelope("k")
    consume(body, lambda task: None)
    about = {"sender": "refresh", "key": "k", "claim": body["claim"], "attempts": 1}
    assert heard == [
        ("started", {**about, "task": {"id": "k"}}),
        ("finished", {**about, "task": {"id": "k"}}),
    ]


def test_a_failed_run_with_retries_left_is_retried_with_its_delay(heard: list[Any]) -> None:
    consume(envelope("k"), fail, attempts=1, max_retries=1)
    assert [name for name, _ in heard] == ["started", "retried"]
    retried = heard[1][1]
    assert isinstance(retried["error"], TaskError)
    assert retried["delay_seconds"] == 30
    assert retried["attempts"] == 1


def test_the_last_failed_run_gives_up(heard: list[Any]) -> None:
    consume(envelope("k"), fail, attempts=2, max_retries=1)
    assert [name for name, _ in heard] == ["started", "gave_up"]
    assert isinstance(heard[1][1]["error"], TaskError)
    assert "delay_seconds" not in heard[1][1]
    assert claims() == {}  # released, as without receivers


@pytest.mark.parametrize("run", [lambda task: None, fail], ids=["finished", "gave_up"])
def test_a_signal_alone_gets_the_full_arguments(run: Any) -> None:
    # The arguments are built only when a signal has receivers: an end
    # signal with none before it still gets them all.
    got: list[dict[str, Any]] = []

    def receiver(signal: Signal, **kwargs: Any) -> None:
        got.append(kwargs)

    for signal in (signals.task_finished, signals.task_gave_up):
        signal.connect(receiver)
    try:
        body = envelope("k")
        consume(body, run, attempts=2, max_retries=1)
    finally:
        for signal in (signals.task_finished, signals.task_gave_up):
            signal.disconnect(receiver)
    [arguments] = got
    about = {"sender": "refresh", "key": "k", "claim": body["claim"], "attempts": 2}
    assert {name: arguments[name] for name in about} == about
    assert arguments["task"] == {"id": "k"}


def test_a_malformed_body_sends_nothing(heard: list[Any]) -> None:
    consume({"not": "an envelope"}, lambda task: None)
    assert heard == []


def test_a_receiver_that_raises_is_logged_and_changes_nothing(
    heard: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    def broken(**kwargs: Any) -> None:
        raise RuntimeError("receiver broke")

    signals.task_started.connect(broken)
    try:
        batch = consume(envelope("k"), lambda task: None)
    finally:
        signals.task_started.disconnect(broken)
    assert batch.messages[0].settlement == "ack"
    assert [name for name, _ in heard] == ["started", "finished"]
    [record] = [r for r in caplog.records if r.name == "astral_taskclaim.signals"]
    assert record.event == "queue.signal_receiver_failed"  # type: ignore[attr-defined]
    assert record.key == "k"  # type: ignore[attr-defined]
    assert "receiver broke" in caplog.text


def test_the_worker_sends_them_from_the_same_core(heard: list[Any]) -> None:
    queue = MemoryQueue("refresh", options={})
    queue.send(envelope("k"))
    task = TaskRegistry().task(queue="refresh")(lambda task: None)
    Worker("refresh", task=task, backend=queue, wait=0, burst=True).run()
    assert [(name, about["key"], about["sender"]) for name, about in heard] == [
        ("started", "k", "refresh"),
        ("finished", "k", "refresh"),
    ]
