"""Worker: batches through consume_claimed, settling, stopping, recovering."""

from __future__ import annotations

import logging
import os
import signal
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import fields
from typing import Any

import psycopg
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, connections, transaction
from django.db.transaction import TransactionManagementError
from django.test import override_settings

from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.consumer.summary import ConsumeSummary, TaskRun, WorkerStats
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks import ClaimedTask, TaskRegistry
from astral_taskclaim.worker import loop as worker_module
from astral_taskclaim.worker.loop import Worker
from tests.claimkit import claims, django_pid, terminate
from tests.eventkit import EventWaiter

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


class Failure(Exception):
    pass


@pytest.fixture
def queue() -> Iterator[PostgresQueue]:
    made = PostgresQueue("jobs", options={"queue_name": f"worker-{uuid.uuid4().hex}"})
    yield made
    made.close()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [made.queue_name])


def make_task(run: Callable[[Any], object], **options: Any) -> ClaimedTask[Any]:
    return TaskRegistry().task(queue="jobs", **options)(run)


def send(queue: PostgresQueue, *ids: int) -> None:
    for id_ in ids:
        assert enqueue_claimed(queue, f"job:{id_}", {"id": id_}, window_seconds=300)


def rows(queue: PostgresQueue) -> list[tuple[int, int, bool, bool]]:
    """(task id, attempts, leased, visible now) of each message."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT (body::json->'task'->>'id')::int, attempts, lease IS NOT NULL,
                      visible_at <= clock_timestamp()
               FROM taskclaim.message WHERE queue = %s ORDER BY id""",
            [queue.queue_name],
        )
        return cursor.fetchall()


def expire(queue: PostgresQueue) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE taskclaim.message SET visible_at = clock_timestamp() WHERE queue = %s",
            [queue.queue_name],
        )


def test_burst_drains_the_queue_in_batches_and_logs_each(
    queue: PostgresQueue, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[int] = []
    send(queue, 1, 2, 3, 4, 5)
    task = make_task(lambda t: ran.append(t["id"]))
    worker = Worker("jobs", task=task, backend=queue, batch_size=2, wait=0, burst=True)
    with caplog.at_level(logging.INFO, logger="astral_taskclaim.worker.loop"):
        stats = worker.run()
    assert ran == [1, 2, 3, 4, 5]
    assert (stats.batches, stats.received, stats.ok) == (3, 5, 5)
    assert rows(queue) == []
    assert set(claims()) == {f"job:{n}" for n in range(1, 6)}  # kept for the window
    batches = [r for r in caplog.records if getattr(r, "event", None) == "worker.batch"]
    counts = [(r.received, r.ok, r.retried, r.failed, r.malformed) for r in batches]  # type: ignore[attr-defined]
    assert counts == [(2, 2, 0, 0, 0), (2, 2, 0, 0, 0), (1, 1, 0, 0, 0)]


def test_one_at_a_time_runs_on_the_receiving_thread(queue: PostgresQueue) -> None:
    threads: list[threading.Thread] = []
    send(queue, 1, 2, 3)
    task = make_task(lambda t: threads.append(threading.current_thread()))
    Worker("jobs", task=task, backend=queue, batch_size=2, wait=0, burst=True).run()
    assert threads == [threading.current_thread()] * 3


@override_settings(TASKCLAIM_DELAY_SCALE=1.0)
def test_failures_retry_with_backoff_then_give_up(queue: PostgresQueue) -> None:
    def fail(task: Any) -> None:
        raise Failure("no")

    task = make_task(fail, max_retries=1)
    send(queue, 1)
    stats = Worker("jobs", task=task, backend=queue, wait=0, burst=True).run()
    assert (stats.retried, stats.retry_delays) == (1, [30])
    assert rows(queue) == [(1, 1, False, False)]  # delayed: the burst ends without it
    assert 329 < claims()["job:1"][1] <= 330  # held through the retry and one window
    expire(queue)
    stats = Worker("jobs", task=task, backend=queue, wait=0, burst=True).run()
    assert (stats.received, stats.failed) == (1, 1)
    assert rows(queue) == []
    assert claims() == {}  # released on giving up


def test_max_messages_stops_after_that_many(queue: PostgresQueue) -> None:
    send(queue, 1, 2, 3, 4, 5)
    task = make_task(lambda t: None)
    worker = Worker("jobs", task=task, backend=queue, batch_size=2, max_messages=3)
    stats = worker.run()
    assert (stats.batches, stats.received) == (2, 3)
    assert [id_ for id_, *_ in rows(queue)] == [4, 5]


def test_stop_finishes_the_message_and_returns_the_rest(queue: PostgresQueue) -> None:
    ran: list[int] = []

    def run(task: Any) -> None:
        ran.append(task["id"])
        if task["id"] == 2:
            worker.stop()  # as the first SIGTERM does, mid-batch

    send(queue, 1, 2, 3, 4)
    worker = Worker("jobs", task=make_task(run), backend=queue, batch_size=4)
    stats = worker.run()
    assert ran == [1, 2]
    assert (stats.ok, stats.returned) == (2, 2)
    # Visible again at once, and not counted as attempts: they never ran.
    assert rows(queue) == [(3, 0, False, True), (4, 0, False, True)]


def test_stop_hands_back_the_rest_at_once_while_the_message_runs(queue: PostgresQueue) -> None:
    # They stayed leased (their leases extended) until the running task
    # ended, however long it ran.
    started, release = threading.Event(), threading.Event()

    def run(task: Any) -> None:
        started.set()
        assert release.wait(30)

    send(queue, 1, 2, 3)
    worker = Worker("jobs", task=make_task(run), backend=queue, batch_size=3)
    with EventWaiter("worker.handed_back") as handed_back:
        thread = in_thread(worker)
        try:
            assert started.wait(30)
            worker.stop()  # the first SIGTERM
            assert handed_back.wait(30)
            waiting = rows(queue)
        finally:
            release.set()
            thread.join(60)
    # Visible again while the first still ran, not counted as attempts.
    assert waiting == [(1, 1, True, False), (2, 0, False, True), (3, 0, False, True)]
    assert (worker.stats.ok, worker.stats.returned) == (1, 2)
    assert rows(queue) == [(2, 0, False, True), (3, 0, False, True)]


def test_the_second_signal_exits_at_once(
    queue: PostgresQueue, caplog: pytest.LogCaptureFixture
) -> None:
    exits: list[int] = []
    worker = Worker("jobs", task=make_task(lambda t: None), backend=queue, exit=exits.append)
    with caplog.at_level(logging.INFO, logger="astral_taskclaim"):
        worker.handle_signal(signal.SIGTERM)
    assert worker.stopping
    assert worker.stopper.requested  # the shared two-stage stop
    assert exits == []
    [record] = caplog.records
    assert (record.event, record.queue) == ("worker.stopping", "jobs")  # type: ignore[attr-defined]
    assert "finishing the current message" in record.getMessage()
    worker.handle_signal(signal.SIGINT)
    assert exits == [128 + signal.SIGINT]


@override_settings(TASKCLAIM_DELAY_SCALE=1.0)
def test_on_run_gets_each_outcome_as_the_core_decided_it(queue: PostgresQueue) -> None:
    def run(task: Any) -> None:
        if task["id"] == 2:
            raise Failure("no")

    send(queue, 1, 2)
    queue.send({"not": "a claimed task"})
    seen: list[TaskRun] = []
    task = make_task(run, max_retries=1)
    worker = Worker("jobs", task=task, backend=queue, wait=0, burst=True, on_run=seen.append)
    stats = worker.run()
    assert [(r.key, r.attempt, r.outcome) for r in seen] == [
        ("job:1", 1, "ok"),
        ("job:2", 1, "retried"),
        (None, 1, "malformed"),
    ]
    assert (stats.ok, stats.retried, stats.malformed, stats.retry_delays) == (1, 1, 1, [30])


def test_signal_handlers_are_installed_for_the_block(queue: PostgresQueue) -> None:
    worker = Worker("jobs", task=make_task(lambda t: None), backend=queue)
    before = signal.getsignal(signal.SIGTERM)
    with worker.signal_handlers():
        os.kill(os.getpid(), signal.SIGTERM)
        assert worker.stopper.wait(30)
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module, "FIRST_BACKOFF", 0.01)


@pytest.mark.usefixtures("fast_backoff")
def test_a_broken_connection_while_receiving_is_reconnected(
    queue: PostgresQueue, caplog: pytest.LogCaptureFixture
) -> None:
    send(queue, 1)
    terminate(django_pid())  # the worker's (this thread's) connection dies
    worker = Worker("jobs", task=make_task(lambda t: None), backend=queue, wait=0, burst=True)
    with caplog.at_level(logging.WARNING, logger="astral_taskclaim.worker.loop"):
        stats = worker.run()
    assert (stats.database_errors, stats.ok) == (1, 1)
    assert rows(queue) == []
    assert [r.event for r in caplog.records] == ["worker.database_error"]  # type: ignore[attr-defined]


@pytest.mark.usefixtures("fast_backoff")
def test_an_error_text_cannot_forge_a_log_line(
    queue: PostgresQueue, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    receive = queue.receive
    failures = [psycopg.OperationalError("lost\nERROR astral_taskclaim.worker.loop: forged")]

    def failing_receive(**options: Any) -> Any:
        if failures:
            raise failures.pop()
        return receive(**options)

    monkeypatch.setattr(queue, "receive", failing_receive)
    worker = Worker("jobs", task=make_task(lambda t: None), backend=queue, wait=0, burst=True)
    with caplog.at_level(logging.WARNING, logger="astral_taskclaim.worker.loop"):
        worker.run()
    [record] = caplog.records
    assert record.getMessage() == (
        "jobs: OperationalError: lost\\nERROR astral_taskclaim.worker.loop: forged; "
        "reconnecting in 0.0 s"
    )


@pytest.mark.usefixtures("fast_backoff")
def test_a_broken_connection_before_settling_is_reconnected_and_settled(
    queue: PostgresQueue,
) -> None:
    def run(task: Any) -> None:
        terminate(django_pid())  # dies after the run, before the settle

    send(queue, 1, 2)
    worker = Worker("jobs", task=make_task(run), backend=queue, batch_size=1, wait=0, burst=True)
    stats = worker.run()
    assert stats.ok == 2
    assert stats.database_errors == 2
    assert rows(queue) == []


def test_bad_arguments_and_unknown_queues() -> None:
    task = make_task(lambda t: None)
    backend = PostgresQueue("jobs")
    for options, error in [
        ({"batch_size": 0}, ValueError),
        ({"batch_size": 101}, ValueError),
        ({"batch_size": 2.0}, TypeError),
        ({"wait": -1}, ValueError),
        ({"max_messages": 0}, ValueError),
    ]:
        with pytest.raises(error):
            Worker("jobs", task=task, backend=backend, **options)
    with pytest.raises(ImproperlyConfigured, match="unknown queue 'nope'"):
        Worker("nope", task=task)
    # (Queue "default" carries the test settings' Django Tasks, so it has a task.)
    spare = {"spare": {"BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue"}}
    with (
        override_settings(TASKCLAIM_QUEUES=spare),
        pytest.raises(LookupError, match="no claimed task is registered for queue 'spare'"),
    ):
        Worker("spare")


def test_stats_merge_every_counter_of_a_summary_and_print_them_one_way() -> None:
    one = ConsumeSummary("jobs", ok=1, retried=2, failed=3, malformed=4, unparseable=5)
    one.claim_write_failures = 6
    one.returned = 7
    one.unknown_task = 1
    one.follow_up_waits = 1
    one.superseded = 2
    one.timed_out = 1
    one.concurrency_limited = 1
    one.retry_delays.append(30)
    stats = WorkerStats("jobs", received=15)
    stats.add(one)
    assert stats.merge(one) is stats
    counters = [f.name for f in fields(ConsumeSummary) if f.name != "queue"]
    assert {name: getattr(stats, name) for name in counters} == {
        "ok": 2,
        "retried": 4,
        "failed": 6,
        "malformed": 8,
        "unparseable": 10,
        "claim_write_failures": 12,
        "unknown_task": 2,
        "follow_up_waits": 2,
        "concurrency_limited": 2,
        "superseded": 4,
        "timed_out": 2,
        "returned": 14,
        "retry_delays": [30, 30],
    }
    assert str(stats) == (
        "jobs: 15 received, 2 ok, 4 retried, 6 failed, 8 malformed, 10 unparseable, "
        "2 waiting for a worker that has their task, 2 follow-ups waiting for their key, "
        "2 waiting for a concurrency slot, 4 follow-ups superseded, 2 timed out, "
        "12 claim writes failed, 14 returned unrun"
    )
    assert str(one).startswith("jobs: 17 messages, 1 ok, 2 retried,")


def short_leases(queue: PostgresQueue) -> PostgresQueue:
    """Another consumer of ``queue``'s messages, leasing them for 2 s."""
    return PostgresQueue("jobs", options={"queue_name": queue.queue_name, "visibility_timeout": 2})


def in_thread(worker: Worker) -> threading.Thread:
    def run() -> None:
        try:
            worker.run()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_batch_running_past_its_leases_keeps_them(
    queue: PostgresQueue, caplog: pytest.LogCaptureFixture
) -> None:
    started, release = threading.Event(), threading.Event()
    ran: list[int] = []

    def run(task: Any) -> None:
        ran.append(task["id"])
        if task["id"] == 1:
            started.set()
            assert release.wait(60)

    send(queue, 1, 2, 3)
    backend, rival = short_leases(queue), short_leases(queue)
    worker = Worker("jobs", task=make_task(run), backend=backend, batch_size=3, wait=0, burst=True)
    with caplog.at_level(logging.INFO):
        thread = in_thread(worker)
        assert started.wait(30)
        # Two leases long, another consumer finds none of the batch: not the
        # running message, nor the two waiting their turn.
        assert rival.receive(max_messages=3, wait_seconds=4).messages == []
        release.set()
        thread.join(60)
    rival.close()
    assert ran == [1, 2, 3]
    assert (worker.stats.ok, worker.stats.leases_lost) == (3, 0)
    assert rows(queue) == []
    assert "queue.settle_stale" not in [getattr(r, "event", None) for r in caplog.records]


def test_a_message_another_delivery_took_is_not_run(queue: PostgresQueue) -> None:
    ran: list[int] = []
    backend, rival = short_leases(queue), short_leases(queue)
    taken: list[Any] = []

    def run(task: Any) -> None:
        ran.append(task["id"])
        if task["id"] == 1:
            # As if this worker had stalled past message 2's lease: it runs
            # out, and another consumer receives it.
            with connection.cursor() as cursor:
                cursor.execute(
                    """UPDATE taskclaim.message SET visible_at = clock_timestamp()
                       WHERE queue = %s AND (body::json->'task'->>'id')::int = 2""",
                    [queue.queue_name],
                )
            taken.extend(rival.receive(max_messages=3).messages)
            assert lost.wait(30)  # the worker's next extension finds it gone

    send(queue, 1, 2, 3)
    worker = Worker("jobs", task=make_task(run), backend=backend, batch_size=3, wait=0, burst=True)
    with EventWaiter("worker.lease_lost") as lost:
        worker.run()
    assert ran == [1, 3]
    assert [message.body["task"]["id"] for message in taken] == [2]
    assert (worker.stats.ok, worker.stats.leases_lost, worker.stats.returned) == (2, 1, 0)
    assert rows(queue) == [(2, 2, True, False)]  # still the rival's
    taken[0].ack()
    rival.settle(taken)
    rival.close()
    assert rows(queue) == []


def test_a_worker_inside_a_transaction_refuses_to_start(queue: PostgresQueue) -> None:
    # It treated the consumer's refusal as a database error and reconnected
    # for ever, even with burst, breaking the caller's transaction.
    task = TaskRegistry().task(queue="jobs", name="tests.atomic")(lambda task: None)
    worker = Worker("jobs", task=task, backend=queue, burst=True, wait=0)
    refused = pytest.raises(TransactionManagementError, match="cannot run inside a transaction")
    with transaction.atomic(), refused:
        worker.run()
