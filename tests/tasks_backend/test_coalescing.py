"""ClaimTaskBackend: coalescing per key and window, and transactions."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.test import override_settings

from astral_taskclaim.tasks_backend.compat import TaskResultStatus
from tests.claimkit import raw_connection

from . import jobs
from .running import claims, drain, message_rows


def test_enqueues_of_the_same_arguments_coalesce_into_the_claiming_run() -> None:
    first = jobs.refresh.enqueue(1)
    again = jobs.refresh.enqueue(1)
    other = jobs.refresh.enqueue(2)
    assert again.id == first.id
    assert other.id != first.id
    assert again.status == TaskResultStatus.READY
    assert len(message_rows()) == 2
    assert claims() == [
        (f"{jobs.refresh.module_path}:[[1],{{}}]", first.id),
        (f"{jobs.refresh.module_path}:[[2],{{}}]", other.id),
    ]
    drain()
    # Within the window the finished run still holds the key: callers get it.
    later = jobs.refresh.enqueue(1)
    assert later.id == first.id
    assert later.status == TaskResultStatus.SUCCESSFUL
    assert later.return_value == 1
    assert jobs.calls == [("refresh", 1), ("refresh", 2)]


def test_a_key_function_and_using_choose_the_key() -> None:
    first = jobs.refresh_by_key.enqueue(7, reason="a")
    assert jobs.refresh_by_key.enqueue(7, reason="b").id == first.id
    assert claims() == [("room:7", first.id)]
    explicit = jobs.refresh_by_key.using(key="room:all", window_seconds=60).enqueue(8)
    assert explicit.id != first.id
    assert ("room:all", explicit.id) in claims()


def test_a_long_derived_key_is_hashed_to_fit() -> None:
    result = jobs.refresh.enqueue("x" * 2000)
    [(key, token)] = claims()
    assert token == result.id
    assert key.startswith(f"{jobs.refresh.module_path}:sha256:")
    assert len(key) < 200


def test_the_claim_is_released_when_the_run_gives_up_so_the_key_runs_again() -> None:
    with override_settings(TASKCLAIM_DELAY_SCALE=0.001):
        failing = jobs.always_fails.using(window_seconds=300, max_retries=0)
        result = failing.enqueue()
        assert failing.enqueue().id == result.id
        drain()
    assert claims() == []
    assert failing.enqueue().id != result.id


def test_enqueue_in_a_rolled_back_transaction_leaves_nothing() -> None:
    class Rollback(Exception):
        pass

    def enqueue_then_fail() -> None:
        with transaction.atomic():
            jobs.refresh.enqueue(5)
            jobs.add.enqueue(1, 2)
            raise Rollback

    with pytest.raises(Rollback):
        enqueue_then_fail()
    assert message_rows() == []
    assert claims() == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM taskclaim.task_result")
        assert cursor.fetchone() == (0,)


def test_enqueue_in_a_committed_transaction_commits_with_it() -> None:
    with transaction.atomic():
        result = jobs.add.enqueue(1, 2)
    assert jobs.add.get_result(result.id).status == TaskResultStatus.READY
    assert len(message_rows()) == 1


def test_a_remote_queue_refuses_enqueue_inside_a_transaction(memory_backend: Any) -> None:
    with (
        transaction.atomic(),
        pytest.raises(transaction.TransactionManagementError, match="on_commit"),
    ):
        jobs.add.enqueue(1, 2)
    assert memory_backend.entries == {}


def test_a_remote_queue_coalesces_and_records_too(memory_backend: Any) -> None:
    first = jobs.refresh.enqueue(9)
    assert jobs.refresh.enqueue(9).id == first.id
    assert len(memory_backend.entries) == 1
    assert jobs.refresh.get_result(first.id).status == TaskResultStatus.READY
    from astral_taskclaim.worker.loop import Worker

    Worker("mem", wait=0, burst=True).run()
    assert jobs.refresh.get_result(first.id).return_value == 9


def test_a_failed_send_to_a_remote_queue_leaves_no_result_or_claim(
    memory_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from astral_taskclaim.queues.memory import MemoryQueue

    def refuse(self: Any, body: Any, *, delay_seconds: float = 0) -> None:
        raise ConnectionError("queue down")

    monkeypatch.setattr(MemoryQueue, "send", refuse)
    with pytest.raises(ConnectionError):
        jobs.refresh.enqueue(4)
    assert claims() == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM taskclaim.task_result")
        assert cursor.fetchone() == (0,)


def test_a_claim_that_expired_after_the_transaction_began_does_not_hold_the_key() -> None:
    # Claim windows are timed from the statement, as every claim write does:
    # a claim live at the transaction's start but over by the call is expired.
    key = f"{jobs.refresh.module_path}:[[5],{{}}]"
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT transaction_timestamp()")
            [(started,)] = cursor.fetchall()
        with raw_connection() as other:
            other.execute(
                """INSERT INTO taskclaim.claim (key, expires_at, token) VALUES
                   (%s, %s::timestamptz + interval '1 millisecond', gen_random_uuid())""",
                [key, started],
            )
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(0.01)")  # past the expiry
        result = jobs.refresh.enqueue(5)
    assert claims() == [(key, result.id)]
    assert len(message_rows()) == 1
