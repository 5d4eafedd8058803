"""Database faults under running workers: connections terminated with
``pg_terminate_backend`` mid-run, the server restarted (the embedded one,
with its ``pg_ctl``; on another server every worker connection is
terminated instead, which is what a restart does to a worker), also with
messages in flight side by side in a ``--concurrency`` worker (audited for
claims taken while another held the key), and a claim
write cut off by ``statement_timeout`` while another transaction holds its
row. The workers recover, no task is lost, and the logs carry the TypeScript package's
events (``queue.claim_hold_failed``, ``queue.claim_release_failed``).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.db.backends.signals import connection_created

from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.consumer.summary import WorkerStats
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks import ClaimedTask, TaskRegistry
from astral_taskclaim.testing import hold_transaction
from astral_taskclaim.worker.loop import Worker
from tests.claimkit import claims
from tests.reliability.audit import overlaps, writes
from tests.reliability.processes import Fleet, RunListener, runs
from tests.reliability.support import EventLog, record_figures, sized, wait_until
from tests.workerkit import restart_server_or_terminate, terminate_application

pytestmark = pytest.mark.django_db(transaction=True)

TERMINATIONS = sized(4, 30)
RESTARTS = sized(1, 5)
IN_FLIGHT = sized(4, 8)  # runs side by side in one worker


def ok_tasks(first: int, count: int) -> list[dict[str, Any]]:
    return [{"id": id_, "mode": "ok", "sleep_ms": 20} for id_ in range(first, first + count)]


def assert_all_ran_and_kept_their_claims(fleet: Fleet, tokens: dict[int, str]) -> None:
    found = runs()
    assert sorted(id_ for id_, outcomes in found.items() if "ok" in outcomes) == sorted(tokens)
    assert fleet.messages_left() == 0
    held = {key: token for key, (token, left) in claims().items() if left > 0}
    assert held == {f"reliability:{id_}": token for id_, token in tokens.items()}


@pytest.mark.slow
def test_terminated_worker_connections_mid_run_lose_nothing(fleet: Fleet) -> None:
    fleet.max_retries = 20  # a run cut off by a termination fails; it must not give up
    wave = sized(10, 20)
    tokens: dict[int, str] = {}
    listener = RunListener()
    terminated = 0
    try:
        workers = [fleet.start("--batch-size", "3", "--wait", "1") for _ in range(2)]
        for number in range(TERMINATIONS):
            # A wave of tasks; once a few of them ran, cut every connection
            # of the workers, which are in the middle of the rest.
            tokens |= fleet.enqueue(ok_tasks(1 + number * wave, wave))
            for _ in range(2 + number % 3):
                assert listener.next(timeout=60) is not None, "the workers stopped running tasks"
            terminated += terminate_application(fleet.application_name)
        tokens |= fleet.enqueue(ok_tasks(1 + TERMINATIONS * wave, wave))
        wait_until(lambda: fleet.messages_left() == 0, "the queue to drain", timeout=120)
    finally:
        listener.close()
    assert [worker.process.poll() for worker in workers] == [None, None]  # they recovered
    assert [worker.stop() for worker in workers] == [0, 0]
    assert_all_ran_and_kept_their_claims(fleet, tokens)
    events = fleet.events()
    recovered = events["worker.database_error"] + events["queue.claim_hold_failed"]
    assert recovered >= 1, events
    total = sum(len(outcomes) for outcomes in runs().values())
    record_figures(
        "terminations",
        tasks=len(tokens),
        terminated_connections=terminated,
        runs=total,
        duplicates=total - len(tokens),
        losses=0,
        database_errors=events["worker.database_error"],
        claim_hold_failed=events["queue.claim_hold_failed"],
    )


@pytest.mark.slow
def test_a_server_restart_mid_run_loses_nothing(fleet: Fleet) -> None:
    fleet.max_retries = 20
    batch = sized(20, 200)
    tokens: dict[int, str] = {}
    workers = [fleet.start("--batch-size", "3", "--wait", "1") for _ in range(2)]
    how = ""
    for number in range(RESTARTS):
        first = 1 + number * batch
        tokens |= fleet.enqueue(ok_tasks(first, batch))
        wait_until(lambda first=first: first in runs(), "runs before the restart")  # type: ignore[misc]
        how, _ = restart_server_or_terminate(fleet.application_name)
    tokens |= fleet.enqueue(ok_tasks(1 + RESTARTS * batch, batch))  # sent after the last one
    wait_until(lambda: fleet.messages_left() == 0, "the queue to drain", timeout=120)
    assert [worker.process.poll() for worker in workers] == [None, None]
    assert [worker.stop() for worker in workers] == [0, 0]
    assert_all_ran_and_kept_their_claims(fleet, tokens)
    events = fleet.events()
    # A restart fails the workers' next statements; a termination between
    # batches is seen by the LISTEN connection (Django's reconnects anyway).
    assert events["worker.database_error"] + events["queue.listen_failed"] >= 1, events
    total = sum(len(outcomes) for outcomes in runs().values())
    record_figures(
        "restarts",
        how=how,
        restarts=RESTARTS,
        tasks=len(tokens),
        runs=total,
        duplicates=total - len(tokens),
        losses=0,
        database_errors=events["worker.database_error"],
    )


@pytest.mark.slow
@pytest.mark.usefixtures("audit")
def test_a_server_restart_with_messages_in_flight_side_by_side_loses_nothing(
    fleet: Fleet,
) -> None:
    """``IN_FLIGHT`` messages running side by side in a ``--concurrency
    IN_FLIGHT`` worker when the server restarts (immediate shutdown): each
    runs to success, and no claim is taken while another holds its key."""
    fleet.max_retries = 20
    fleet.visibility_timeout = 10  # the runs' leases outlast their sleep
    # Queued first, one per receive: each thread takes one and runs it.
    tasks = [{"id": id_, "mode": "ok", "sleep_ms": 3000} for id_ in range(1, IN_FLIGHT + 1)]
    tokens = fleet.enqueue(tasks)
    worker = fleet.start("--concurrency", str(IN_FLIGHT), "--batch-size", "1", "--wait", "1")
    # Every one recorded, now asleep in its run (their NOTIFYs arrive
    # together, so the run table is read rather than the channel).
    wait_until(lambda: len(runs()) == IN_FLIGHT, "the runs in flight", timeout=60)
    how, _ = restart_server_or_terminate(fleet.application_name)
    tokens |= fleet.enqueue(ok_tasks(IN_FLIGHT + 1, IN_FLIGHT))  # sent after the restart
    wait_until(lambda: fleet.messages_left() == 0, "the queue to drain", timeout=180)
    assert worker.stop() == 0
    assert_all_ran_and_kept_their_claims(fleet, tokens)
    history = writes()
    assert len({write.token for write in history}) == len(tokens)  # the audit saw each claim
    assert overlaps(history) == []
    total = sum(len(outcomes) for outcomes in runs().values())
    record_figures(
        "restart_in_flight",
        how=how,
        in_flight=IN_FLIGHT,
        tasks=len(tokens),
        runs=total,
        duplicates=total - len(tokens),
        losses=0,
        database_errors=fleet.events()["worker.database_error"],
    )


# A claim write cut off by statement_timeout (in-process, so the log
# records can be read with their ``extra``).

TIMEOUT_THREAD = "taskclaim-timeout-worker"


@pytest.fixture
def short_statement_timeout() -> Iterator[None]:
    """Connections the worker thread opens time statements out after 300 ms."""

    def limit(sender: Any, connection: Any, **kwargs: Any) -> None:
        if threading.current_thread().name == TIMEOUT_THREAD:
            with connection.cursor() as cursor:
                cursor.execute("SET statement_timeout = '300ms'")

    connection_created.connect(limit)
    yield
    connection_created.disconnect(limit)


def run_worker(worker: Worker) -> WorkerStats:
    """``worker.run()`` in a thread of its own (its own connection)."""
    result: list[WorkerStats] = []

    def target() -> None:
        try:
            result.append(worker.run())
        finally:
            connections.close_all()

    thread = threading.Thread(target=target, name=TIMEOUT_THREAD)
    thread.start()
    thread.join(120)
    assert result, "the worker thread failed"
    return result[0]


def row_locked(keys: list[str]) -> Callable[[Callable[[], None]], None]:
    def body(hold: Callable[[], None]) -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM taskclaim.claim WHERE key = ANY(%s) FOR UPDATE", [keys])
            hold()

    return body


def test_a_timed_out_claim_write_is_logged_and_the_batch_goes_on(
    clean_tables: None, event_log: EventLog, short_statement_timeout: None
) -> None:
    queue = PostgresQueue("faults", options={"queue_name": f"faults-{uuid.uuid4().hex}"})
    ran: list[str] = []

    def run(task: dict[str, Any]) -> None:
        ran.append(task["name"])
        if task["fail"] and ran.count(task["name"]) == 1:
            raise RuntimeError("first run fails")

    retrying: ClaimedTask[Any] = TaskRegistry().task(queue="faults", max_retries=3)(run)
    a = enqueue_claimed(queue, "faults:a", {"name": "a", "fail": True}, window_seconds=600)
    b = enqueue_claimed(queue, "faults:b", {"name": "b", "fail": False}, window_seconds=600)
    before = claims()
    with hold_transaction(row_locked(["faults:a"])):
        stats = run_worker(Worker("faults", task=retrying, backend=queue, wait=0, burst=True))
    # a failed; holding its claim timed out: logged, retried all the same.
    # b, next in the batch, ran on the same connection.
    assert ran == ["a", "b"]
    assert (stats.retried, stats.ok, stats.claim_write_failures) == (1, 1, 1)
    [failed] = event_log.events("queue.claim_hold_failed")
    assert failed.key == "faults:a"  # type: ignore[attr-defined]
    assert failed.exc_info is not None
    assert "statement timeout" in str(failed.exc_info[1])
    assert claims()["faults:a"][0] == before["faults:a"][0] == a
    with connection.cursor() as cursor:  # the retry's delay passes
        cursor.execute(
            "UPDATE taskclaim.message SET visible_at = now() WHERE queue = %s", [queue.queue_name]
        )
    stats = run_worker(Worker("faults", task=retrying, backend=queue, wait=0, burst=True))
    assert ran == ["a", "b", "a"]  # nothing lost
    assert stats.ok == 1
    assert {key: token for key, (token, _) in claims().items()} == {"faults:a": a, "faults:b": b}

    giving_up: ClaimedTask[Any] = TaskRegistry().task(queue="faults", max_retries=0)(run)
    c = enqueue_claimed(queue, "faults:c", {"name": "c", "fail": True}, window_seconds=600)
    with hold_transaction(row_locked(["faults:c"])):
        stats = run_worker(Worker("faults", task=giving_up, backend=queue, wait=0, burst=True))
    assert (stats.failed, stats.claim_write_failures) == (1, 1)
    assert [r.key for r in event_log.events("queue.task_failed")] == ["faults:c"]  # type: ignore[attr-defined]
    assert [r.key for r in event_log.events("queue.claim_release_failed")] == ["faults:c"]  # type: ignore[attr-defined]
    # Acked all the same, the key claimed for the window, as the TypeScript package does.
    assert claims()["faults:c"][0] == c
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM taskclaim.message WHERE queue = %s", [queue.queue_name]
        )
        assert cursor.fetchone() == (0,)
    record_figures("statement_timeouts", claim_hold_failed=1, claim_release_failed=1, losses=0)
