"""ClaimTaskBackend conformance: retries, errors, deferral and priority."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from astral_taskclaim.queues import memory
from astral_taskclaim.tasks_backend.compat import TaskResultStatus, task_backends

from . import jobs
from .running import drain, make_due, message_rows

pytestmark = pytest.mark.usefixtures("fast_backoff")


@pytest.fixture
def fast_backoff() -> Any:
    with override_settings(TASKCLAIM_DELAY_SCALE=0.001):
        yield


def test_a_failed_attempt_is_recorded_and_retried_with_the_error_on_its_message() -> None:
    result = jobs.flaky.enqueue(1)
    stats = drain(max_messages=1)
    assert stats.retried == 1
    result.refresh()
    assert result.status == TaskResultStatus.READY
    assert not result.is_finished
    [error] = result.errors
    assert error.exception_class is jobs.Boom
    assert error.exception_class_path == "tests.tasks_backend.jobs.Boom"
    assert "attempt failed (1 to go)" in error.traceback
    assert "Traceback" in error.traceback
    assert result.attempts == 1
    assert result.finished_at is None
    [(_body, _priority, _visible, last_error, attempts)] = message_rows()
    assert last_error == "Boom: attempt failed (1 to go)"
    assert attempts == 1
    make_due()
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == "done"
    assert result.attempts == 2
    assert len(result.errors) == 1
    assert result.last_attempted_at > result.started_at


def test_a_run_gives_up_after_the_backends_max_retries() -> None:
    result = jobs.always_fails.enqueue()
    for _ in range(3):  # the test backend's max_retries is 2: three attempts
        drain(max_messages=1)
        make_due()
    assert drain().received == 0
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.is_finished
    assert len(result.errors) == 3
    assert result.attempts == 3
    assert result.finished_at is not None
    with pytest.raises(ValueError, match="failed"):
        _ = result.return_value
    assert [call[0] for call in jobs.calls] == ["always_fails"] * 3


def test_a_tasks_own_max_retries_overrides_the_backends() -> None:
    result = jobs.fails_once_for_good.enqueue()
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 1


def test_run_after_holds_the_run_until_then_even_past_twelve_hours() -> None:
    run_after = timezone.now() + timedelta(days=2)
    result = jobs.add.using(run_after=run_after).enqueue(1, 2)
    [(body, _priority, visible_at, _error, _attempts)] = message_rows()
    assert visible_at == run_after  # the PostgreSQL queue waits the whole delay at once
    assert body["task"]["runAfter"] == run_after.isoformat()
    assert drain().received == 0
    assert jobs.add.get_result(result.id).task.run_after == run_after
    make_due()  # a message delivered early (clock skew) is sent again, not run
    drain()
    assert jobs.calls == []
    [(_body, _priority, visible_at, _error, attempts)] = message_rows()
    assert attempts == 0
    assert visible_at > timezone.now() + timedelta(hours=11)


def test_remote_queues_carry_long_delays_in_hops_of_their_longest_delay() -> None:
    clock = [0.0]
    queues = {"default": {"BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue"}}
    queues["mem"] = {"BACKEND": "astral_taskclaim.queues.memory.MemoryQueue"}
    tasks = {"default": {"BACKEND": "astral_taskclaim.tasks_backend.ClaimTaskBackend"}}
    tasks["default"]["OPTIONS"] = {"queue": "mem"}
    tasks["default"]["QUEUES"] = ["default", "urgent"]
    memory.reset()
    store = memory._store_for("mem")
    store.clock = lambda: clock[0]
    with override_settings(TASKCLAIM_QUEUES=queues, TASKS=tasks):
        backend = task_backends["default"]
        assert backend.supports_priority is False
        assert backend.supports_defer is True
        run_after = timezone.now() + timedelta(hours=13)
        result = jobs.add.using(run_after=run_after).enqueue(1, 2)
        [entry] = store.entries.values()
        assert entry.visible_at == 43_200  # the 12-hour limit
        clock[0] = 43_200
        from astral_taskclaim.worker.loop import Worker

        stats = Worker("mem", wait=0, burst=True).run()
        assert stats.received == 1
        assert jobs.calls == []
        # Delivered early (the wall clock says 13 h are still ahead): sent
        # again for another 12 hours, as a new message, and not run.
        [again] = store.entries.values()
        assert again.id != entry.id
        assert again.attempts == 0
        assert again.visible_at == 43_200 + 43_200
        assert jobs.add.get_result(result.id).status == TaskResultStatus.READY
        due = jobs.add.using(run_after=timezone.now() - timedelta(seconds=5)).enqueue(3, 4)
        Worker("mem", wait=0, burst=True).run()
        assert jobs.add.get_result(due.id).return_value == 7
    memory.reset()


def test_higher_priority_runs_first_on_the_postgresql_queue() -> None:
    jobs.record.using(priority=-10).enqueue("low")
    jobs.record.enqueue("normal")
    jobs.record.using(priority=50).enqueue("high")
    assert [row[1] for row in message_rows()] == [-10, 0, 50]
    drain(batch_size=1)
    assert [call[1] for call in jobs.calls] == ["high", "normal", "low"]


def test_a_typescript_senders_message_defaults_to_priority_zero() -> None:
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO taskclaim.message (queue, body) VALUES ('x', '{}')")
        cursor.execute("SELECT priority, last_error FROM taskclaim.message WHERE queue = 'x'")
        assert cursor.fetchall() == [(0, None)]
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = 'x'")


def sqs_backend(moto_sqs: Any, url: str, **options: Any) -> dict[str, Any]:
    """Settings with the default Django Tasks backend on an SQS queue ``sqs``."""
    queues = {"default": {"BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue"}}
    queues["sqs"] = {
        "BACKEND": "astral_taskclaim.queues.sqs.SQSQueue",
        "OPTIONS": moto_sqs.options(url, wait_time_seconds=0, **options),
    }
    tasks = {"default": {"BACKEND": "astral_taskclaim.tasks_backend.ClaimTaskBackend"}}
    tasks["default"]["OPTIONS"] = {"queue": "sqs"}
    return {"TASKCLAIM_QUEUES": queues, "TASKS": tasks}


def sqs_counts(moto_sqs: Any, url: str) -> tuple[int, int]:
    """Visible and delayed messages of the SQS queue at ``url``."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"]
    found = moto_sqs.client().get_queue_attributes(QueueUrl=url, AttributeNames=names)
    visible, delayed = (int(found["Attributes"][name]) for name in names)
    return visible, delayed


def test_sqs_carries_a_run_due_in_an_hour_in_hops_of_900_seconds(moto_sqs: Any) -> None:
    from astral_taskclaim.worker.loop import Worker

    url = moto_sqs.create_queue()
    with override_settings(**sqs_backend(moto_sqs, url)):
        run_after = timezone.now() + timedelta(hours=1)
        result = jobs.add.using(run_after=run_after).enqueue(1, 2)
        # Sent with SQS's longest DelaySeconds for a new message.
        assert sqs_counts(moto_sqs, url) == (0, 1)
        # Delivered early, as after 900 s: sent again for at most 900 s, acked, not run.
        early = {"key": result.id, "claim": result.id, "windowSeconds": 3601.0}
        early["task"] = {"taskPath": jobs.add.module_path, "args": [1, 2], "kwargs": {}}
        early["task"]["runAfter"] = run_after.isoformat()
        moto_sqs.client().purge_queue(QueueUrl=url)
        moto_sqs.client().send_message(QueueUrl=url, MessageBody=json.dumps(early))
        stats = Worker("sqs", wait=0, burst=True).run()
        assert stats.received == 1
        assert jobs.calls == []
        assert sqs_counts(moto_sqs, url) == (0, 1)
        assert jobs.add.get_result(result.id).status == TaskResultStatus.READY


def test_an_outbox_queue_holds_a_deferred_run_until_due(moto_sqs: Any) -> None:
    from astral_taskclaim.worker.relay import Relay

    url = moto_sqs.create_queue()
    with override_settings(**sqs_backend(moto_sqs, url, outbox=True)):
        run_after = timezone.now() + timedelta(hours=2)
        jobs.add.using(run_after=run_after).enqueue(1, 2)
        assert Relay("sqs", burst=True).run().sent == 0
        with connection.cursor() as cursor:
            cursor.execute("SELECT available_at FROM taskclaim.outbox WHERE queue = 'sqs'")
            [(available_at,)] = cursor.fetchall()
            assert abs((available_at - run_after).total_seconds()) < 5
            cursor.execute("UPDATE taskclaim.outbox SET available_at = statement_timestamp()")
        assert Relay("sqs", burst=True).run().sent == 1
        assert sqs_counts(moto_sqs, url) == (1, 0)


def test_a_run_whose_outbox_row_is_refused_for_good_fails_with_the_reason(
    moto_sqs: Any,
) -> None:
    from astral_taskclaim.worker.relay import Relay

    url = moto_sqs.create_queue(MaximumMessageSize="1024")
    with override_settings(**sqs_backend(moto_sqs, url, outbox=True)):
        refused = jobs.add.enqueue("x" * 2000, "y")
        fine = jobs.add.enqueue(1, 2)
        stats = Relay("sqs", burst=True).run()
        assert (stats.sent, stats.set_aside) == (1, 1)
        result = jobs.add.get_result(refused.id)
        assert result.status == TaskResultStatus.FAILED
        [error] = result.errors
        assert error.exception_class_path == "astral_taskclaim.queues.remote.RequestRefusedError"
        assert "Message must be shorter than 1024 bytes" in error.traceback
        assert jobs.add.get_result(fine.id).status == TaskResultStatus.READY
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.outbox WHERE queue = 'sqs'")
