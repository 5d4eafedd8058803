"""ClaimTaskBackend conformance: flags, every TaskResult field, runs."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from astral_taskclaim.tasks_backend import ClaimTaskBackend
from astral_taskclaim.tasks_backend.compat import (
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
    task_finished,
    task_started,
)

from . import jobs
from .conftest import drain, message_rows


def test_flags_are_all_supported_on_the_postgresql_queue(backend: Any) -> None:
    assert isinstance(backend, ClaimTaskBackend)
    assert backend.supports_defer is True
    assert backend.supports_async_task is True
    assert backend.supports_get_result is True
    assert backend.supports_priority is True
    assert backend.check() == []


def test_enqueue_returns_a_ready_result_stored_with_its_message() -> None:
    before = timezone.now()
    result = jobs.add.enqueue(2, b=3)
    assert result.status == TaskResultStatus.READY
    assert uuid.UUID(result.id)
    assert result.args == [2]
    assert result.kwargs == {"b": 3}
    assert result.backend == "default"
    assert result.task.func is jobs.add.func
    assert result.enqueued_at is not None
    assert result.enqueued_at >= before - timedelta(seconds=1)
    assert result.started_at is None
    assert result.finished_at is None
    assert result.last_attempted_at is None
    assert result.errors == []
    assert result.worker_ids == []
    assert result.attempts == 0
    assert not result.is_finished
    with pytest.raises(ValueError, match="not finished"):
        _ = result.return_value
    [(body, priority, _visible, last_error, attempts)] = message_rows()
    # The TypeScript package's envelope, the claim token being the result id.
    assert list(body) == ["key", "claim", "windowSeconds", "task"]
    assert body["claim"] == result.id
    assert body["windowSeconds"] == 0
    assert body["task"] == {"taskPath": jobs.add.module_path, "args": [2], "kwargs": {"b": 3}}
    assert (priority, last_error, attempts) == (0, None, 0)
    stored = jobs.add.get_result(result.id)
    assert stored.id == result.id
    assert stored.status == TaskResultStatus.READY
    assert stored.enqueued_at == result.enqueued_at


def test_a_run_fills_every_field_and_refresh_sees_it() -> None:
    result = jobs.add.enqueue(2, 3)
    stats = drain()
    assert stats.ok == 1
    assert jobs.calls == [("add", 2, 3)]
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.is_finished
    assert result.return_value == 5
    assert result.errors == []
    assert len(result.worker_ids) == 1
    assert result.attempts == 1
    assert ":" in result.worker_ids[0]  # host:pid
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.last_attempted_at == result.started_at
    assert message_rows() == []


def test_an_async_task_is_awaited_by_the_worker() -> None:
    result = jobs.async_add.enqueue(4, 5)
    drain()
    assert jobs.calls == [("async_add", 4, 5)]
    assert jobs.async_add.get_result(result.id).return_value == 9


def test_a_task_taking_context_sees_its_result_and_attempt() -> None:
    result = jobs.with_context.enqueue("x")
    drain()
    stored = jobs.with_context.get_result(result.id)
    assert stored.return_value == {"id": result.id, "attempt": 1, "label": "x"}


def test_an_unserialisable_return_value_fails_the_attempt() -> None:
    result = jobs.returns_unserialisable.using().enqueue()
    drain(max_messages=1)
    stored = jobs.returns_unserialisable.get_result(result.id)
    assert stored.status == TaskResultStatus.READY  # a retry is due
    assert stored.errors[0].exception_class is TypeError


def test_arguments_that_are_not_json_are_refused_before_anything_is_written() -> None:
    with pytest.raises(TypeError, match="add: arguments must be JSON"):
        jobs.add.enqueue(object(), 1)
    assert message_rows() == []


def test_unknown_results_do_not_exist(backend: Any) -> None:
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result(str(uuid.uuid4()))
    with pytest.raises(TaskResultDoesNotExist, match="UUID"):
        backend.get_result("not-a-uuid")


def test_aget_result_and_arefresh_read_the_same_row() -> None:
    from asgiref.sync import async_to_sync

    result = jobs.add.enqueue(1, 1)
    drain()

    async def read() -> Any:
        stored = await jobs.add.aget_result(result.id)
        await result.arefresh()
        return stored

    stored = async_to_sync(read)()
    assert stored.return_value == 2
    assert result.return_value == 2


def test_signals_are_sent_for_enqueue_start_and_finish() -> None:
    seen: list[tuple[str, str]] = []

    def receiver(name: str) -> Any:
        def receive(sender: Any, task_result: Any, **kwargs: Any) -> None:
            seen.append((name, task_result.status))

        return receive

    handlers = {
        "enqueued": receiver("enqueued"),
        "started": receiver("started"),
        "finished": receiver("finished"),
    }
    task_enqueued.connect(handlers["enqueued"])
    task_started.connect(handlers["started"])
    task_finished.connect(handlers["finished"])
    try:
        jobs.add.enqueue(1, 2)
        drain()
    finally:
        task_enqueued.disconnect(handlers["enqueued"])
        task_started.disconnect(handlers["started"])
        task_finished.disconnect(handlers["finished"])
    assert seen == [
        ("enqueued", TaskResultStatus.READY),
        ("started", TaskResultStatus.RUNNING),
        ("finished", TaskResultStatus.SUCCESSFUL),
    ]
