"""The backend's aenqueue() and aget_result(), run natively on the event
loop: each test mirrors a sync one (same results, rows and coalescing)."""

from __future__ import annotations

import threading
import uuid
from dataclasses import fields
from typing import Any

import pytest
from django.db import connection, transaction

from astral_taskclaim.db import statements
from astral_taskclaim.db.aio_pool import pool
from astral_taskclaim.tasks_backend.compat import (
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
)
from astral_taskclaim.tasks_backend.sending import RecordingSender
from tests.aiokit import run

from . import jobs
from .running import claims, drain, make_due, message_rows


def result_count() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM taskclaim.task_result")
        [(count,)] = cursor.fetchall()
    return int(count)


def test_aenqueue_writes_claim_message_and_result_without_djangos_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("aenqueue ran a statement on Django's connection")

    async def enqueue() -> tuple[Any, int]:
        result = await jobs.add.aenqueue(2, b=3)
        return result, (await pool(statements.configured_alias())).get_stats()["pool_size"]

    with monkeypatch.context() as patch:
        patch.setattr(statements, "run", refuse)
        result, pooled = run(enqueue())
    assert pooled >= 1
    assert result.status == TaskResultStatus.READY
    assert (result.args, result.kwargs) == ([2], {"b": 3})
    assert result.enqueued_at is not None
    assert (result.started_at, result.finished_at, result.errors) == (None, None, [])
    [(body, priority, _visible, last_error, attempts)] = message_rows()
    assert list(body) == ["key", "claim", "windowSeconds", "task"]
    assert body["claim"] == result.id
    assert body["task"] == {"taskPath": jobs.add.module_path, "args": [2], "kwargs": {"b": 3}}
    assert (priority, last_error, attempts) == (0, None, 0)
    stored = jobs.add.get_result(result.id)
    assert stored.enqueued_at == result.enqueued_at
    drain()
    assert jobs.calls == [("add", 2, 3)]


def test_a_coalesced_aenqueue_returns_the_holders_result() -> None:
    async def enqueue(room: int) -> Any:
        return await jobs.refresh.aenqueue(room)

    first = run(enqueue(1))
    again = run(enqueue(1))
    other = run(enqueue(2))
    assert again.id == first.id
    assert again.status == TaskResultStatus.READY
    assert other.id != first.id
    assert len(message_rows()) == 2
    drain()
    later = run(enqueue(1))
    assert later.id == first.id
    assert later.status == TaskResultStatus.SUCCESSFUL
    assert later.return_value == 1
    assert jobs.calls == [("refresh", 1), ("refresh", 2)]


def test_a_holder_without_a_result_row_reads_as_ready() -> None:
    token = str(uuid.uuid4())
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO taskclaim.claim (key, expires_at, token) "
            "VALUES ('room:5', now() + interval '1 hour', %s)",
            [token],
        )
    result = run(jobs.refresh_by_key.aenqueue(5))
    assert result.id == token
    assert result.status == TaskResultStatus.READY
    assert message_rows() == []


def test_aenqueue_inside_atomic_refuses_before_writing(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only async code allowed Django's blocking connection can be inside
    # atomic() on the event loop; aenqueue must not commit behind it.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

    async def inside() -> None:
        try:
            with transaction.atomic():
                await jobs.add.aenqueue(1, 2)
        finally:
            connection.close()  # this loop's own Django connection

    with pytest.raises(transaction.TransactionManagementError, match=r"call the sync enqueue\("):
        run(inside())
    assert message_rows() == []
    assert result_count() == 0


def test_arguments_that_are_not_json_are_refused_before_anything_is_written() -> None:
    with pytest.raises(TypeError, match="arguments must be JSON"):
        run(jobs.add.aenqueue(object(), 1))
    assert message_rows() == []
    assert claims() == []


def test_aenqueue_sends_the_enqueued_signal() -> None:
    seen: list[str] = []

    def receive(sender: Any, task_result: Any, **kwargs: Any) -> None:
        seen.append(task_result.id)

    task_enqueued.connect(receive)
    try:
        result = run(jobs.add.aenqueue(1, 2))
    finally:
        task_enqueued.disconnect(receive)
    assert seen == [result.id]


def test_a_remote_queue_coalesces_and_records_too(memory_backend: Any) -> None:
    first = run(jobs.refresh.aenqueue(9))
    assert run(jobs.refresh.aenqueue(9)).id == first.id
    assert len(memory_backend.entries) == 1
    assert jobs.refresh.get_result(first.id).status == TaskResultStatus.READY
    assert claims() == [(f"{jobs.refresh.module_path}:[[9],{{}}]", first.id)]


def test_a_remote_queue_records_its_run_on_the_event_loop_and_sends_in_a_thread(
    memory_backend: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from astral_taskclaim.queues.memory import MemoryQueue

    loop_thread = threading.get_ident()
    recorded_in: list[int] = []
    sent_in: list[int] = []
    record, send = RecordingSender.recorded, MemoryQueue.send

    def noting_record(self: Any, body: Any, rows: Any) -> float:
        recorded_in.append(threading.get_ident())
        return record(self, body, rows)

    def noting_send(self: Any, body: Any, *, delay_seconds: float = 0) -> None:
        sent_in.append(threading.get_ident())
        send(self, body, delay_seconds=delay_seconds)

    monkeypatch.setattr(RecordingSender, "recorded", noting_record)
    monkeypatch.setattr(MemoryQueue, "send", noting_send)
    result = run(jobs.refresh.aenqueue(5))
    assert jobs.refresh.get_result(result.id).status == TaskResultStatus.READY
    assert recorded_in == [loop_thread]  # no hop from a thread back to the loop
    assert len(sent_in) == 1
    assert sent_in[0] != loop_thread  # the blocking send, in a worker thread


def test_a_failed_send_to_a_remote_queue_leaves_no_result_or_claim(
    memory_backend: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from astral_taskclaim.queues.memory import MemoryQueue

    def refuse(self: Any, body: Any, *, delay_seconds: float = 0) -> None:
        raise ConnectionError("queue down")

    monkeypatch.setattr(MemoryQueue, "send", refuse)
    with pytest.raises(ConnectionError):
        run(jobs.refresh.aenqueue(4))
    assert claims() == []
    assert result_count() == 0


def test_aget_result_reads_every_field_as_get_result_does() -> None:
    result = jobs.flaky.enqueue(1)
    drain(max_messages=1)
    make_due()
    drain()
    expected = jobs.flaky.get_result(result.id)
    assert expected.status == TaskResultStatus.SUCCESSFUL
    assert len(expected.errors) == 1

    async def read() -> tuple[Any, int]:
        stored = await jobs.flaky.aget_result(result.id)
        return stored, (await pool(statements.configured_alias())).get_stats()["pool_size"]

    stored, pooled = run(read())
    assert pooled == 1  # read on the loop's own connection
    for field in fields(expected):
        assert getattr(stored, field.name) == getattr(expected, field.name), field.name
    assert stored.return_value == "done"


def test_aget_result_of_unknown_ids_does_not_exist() -> None:
    with pytest.raises(TaskResultDoesNotExist):
        run(jobs.add.aget_result(str(uuid.uuid4())))
    with pytest.raises(TaskResultDoesNotExist, match="UUID"):
        run(jobs.add.aget_result("not-a-uuid"))
