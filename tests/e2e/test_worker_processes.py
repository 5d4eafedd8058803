"""``manage.py consume_claimed`` as real subprocesses against the test
database: signals, a killed worker, a database restart, retry delays.

The worker runs ``tests.e2e.workerapp``'s task (see there), started and
stopped with :mod:`tests.workerkit`. Tests wait for states (a worker
blocked on an advisory lock the test holds, rows in the run log or the
queue table), never for fixed times.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection, connections

from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.testing import lock_waiters
from tests.claimkit import raw_connection
from tests.workerkit import (
    WorkerGroup,
    WorkerProcess,
    postgres_queues,
    restart_server_or_terminate,
)

from .support import json_lines, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@dataclass
class E2E:
    """One test's queue, run log and workers."""

    tmp: Path
    queue_name: str
    group: WorkerGroup

    def options(self) -> dict[str, Any]:
        return {"queue_name": self.queue_name, "visibility_timeout": 2, "poll_interval": 0.5}

    def enqueue(self, id_: int, **task: Any) -> str:
        queue = PostgresQueue("e2e", options=self.options())
        body = {"id": id_, "log": str(self.tmp / "runs.jsonl"), **task}
        token = enqueue_claimed(queue, f"e2e:{id_}", body, window_seconds=300)
        assert token is not None
        return token

    def runs(self) -> list[dict[str, Any]]:
        return json_lines(self.tmp / "runs.jsonl")

    def messages(self) -> list[tuple[Any, ...]]:
        """(task id, attempts, leased, due in seconds) of each queued message."""
        with connection.cursor() as cursor:
            cursor.execute(
                """SELECT (body::json->'task'->>'id')::int, attempts, lease IS NOT NULL,
                          extract(epoch FROM visible_at - clock_timestamp())::float8
                   FROM taskclaim.message WHERE queue = %s ORDER BY id""",
                [self.queue_name],
            )
            return cursor.fetchall()

    def start(self, *args: str, delay_scale: float = 1.0) -> WorkerProcess:
        env = {
            "TASKCLAIM_E2E_QUEUES": postgres_queues("e2e", self.options()),
            "TASKCLAIM_E2E_DELAY_SCALE": str(delay_scale),
        }
        return self.group.start("e2e", *args, env=env)


@pytest.fixture
def e2e(tmp_path: Path) -> Iterator[E2E]:
    group = WorkerGroup(tmp_path, "tests.e2e.settings", f"taskclaim-e2e-{uuid.uuid4().hex[:8]}")
    run = E2E(tmp_path, f"e2e-{uuid.uuid4().hex}", group)
    yield run
    group.close()
    connections.close_all()  # the database may have restarted under them
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [run.queue_name])
        cursor.execute("DELETE FROM taskclaim.claim WHERE key LIKE 'e2e:%%'")


@pytest.fixture
def lock() -> Iterator[tuple[int, psycopg.Connection[Any]]]:
    """An advisory lock key the test holds (tasks blocking on it wait)."""
    key = int(uuid.uuid4().int % 2**62)
    holder = raw_connection()
    holder.execute("SELECT pg_advisory_lock(%s)", [key])
    yield key, holder
    holder.close()


def blocked_on(key: int, holder: psycopg.Connection[Any]) -> Callable[[], bool]:
    pid = holder.info.backend_pid
    return lambda: bool(lock_waiters(key, pid))


def test_first_sigterm_finishes_the_message_settles_the_batch_and_exits_0(
    e2e: E2E, lock: tuple[int, psycopg.Connection[Any]]
) -> None:
    key, holder = lock
    e2e.enqueue(1, block=key)
    e2e.enqueue(2)
    e2e.enqueue(3)
    worker = e2e.start("--batch-size", "3")
    wait_for(blocked_on(key, holder), "task 1 to run")
    worker.send(signal.SIGTERM)
    wait_for(lambda: "finishing the current message" in worker.output(), "the signal")
    holder.execute("SELECT pg_advisory_unlock(%s)", [key])
    assert worker.wait() == 0, worker.output()
    assert [run["id"] for run in e2e.runs()] == [1]
    # 1 acked; 2 and 3 never ran and are back in the queue, visible now,
    # their delivery not counted as an attempt.
    left = e2e.messages()
    assert [(id_, attempts, leased) for id_, attempts, leased, _ in left] == [
        (2, 0, False),
        (3, 0, False),
    ]
    assert all(due <= 0 for *_, due in left)
    # Nothing is lost: the next worker runs them.
    assert e2e.start("--burst").wait() == 0
    assert sorted(run["id"] for run in e2e.runs()) == [1, 2, 3]
    assert e2e.messages() == []


def test_first_sigterm_with_n_in_flight_lets_them_finish_and_hands_back_the_rest(
    e2e: E2E, lock: tuple[int, psycopg.Connection[Any]]
) -> None:
    key, holder = lock
    for id_ in range(1, 7):
        e2e.enqueue(id_, **({"block": key} if id_ <= 3 else {}))
    worker = e2e.start("--concurrency", "3", "--batch-size", "6")
    pid = holder.info.backend_pid
    wait_for(lambda: len(lock_waiters(key, pid)) == 3, "tasks 1 to 3 to run side by side")
    worker.send(signal.SIGTERM)
    wait_for(lambda: "handed back 3 messages not started" in worker.output(), "the hand-back")
    # 4 to 6 are visible again while 1 to 3 still run, leased.
    assert [(i, leased) for i, _, leased, _ in e2e.messages()] == [
        (1, True), (2, True), (3, True), (4, False), (5, False), (6, False),
    ]  # fmt: skip
    holder.execute("SELECT pg_advisory_unlock(%s)", [key])
    assert worker.wait() == 0, worker.output()
    assert sorted(run["id"] for run in e2e.runs()) == [1, 2, 3]
    assert [id_ for id_, *_ in e2e.messages()] == [4, 5, 6]


def test_a_second_signal_exits_at_once(e2e: E2E, lock: tuple[int, psycopg.Connection[Any]]) -> None:
    key, holder = lock
    e2e.enqueue(1, block=key)
    worker = e2e.start()
    wait_for(blocked_on(key, holder), "task 1 to run")
    worker.send(signal.SIGINT)
    wait_for(lambda: "finishing the current message" in worker.output(), "the first signal")
    worker.send(signal.SIGINT)
    assert worker.wait() == 128 + signal.SIGINT
    [(id_, attempts, leased, _)] = e2e.messages()
    assert (id_, attempts, leased) == (1, 1, True)  # back when its lease runs out


def test_a_killed_worker_loses_nothing(e2e: E2E, lock: tuple[int, psycopg.Connection[Any]]) -> None:
    key, holder = lock
    e2e.enqueue(1, block=key)
    worker = e2e.start()
    wait_for(blocked_on(key, holder), "task 1 to run")
    worker.kill()
    holder.execute("SELECT pg_advisory_unlock(%s)", [key])
    [(id_, attempts, leased, _)] = e2e.messages()
    assert (id_, attempts, leased) == (1, 1, True)
    # The lease (2 s) runs out and another worker gets the message again.
    second = e2e.start("--burst", "--wait", "30", "--max-messages", "1")
    assert second.wait() == 0, second.output()
    assert [(run["id"], run["run"]) for run in e2e.runs()] == [(1, 1), (1, 2)]
    assert e2e.messages() == []
    assert "1 received, 1 ok" in second.output()


def test_a_database_restart_mid_run_loses_nothing(e2e: E2E) -> None:
    worker = e2e.start()
    for id_ in (1, 2, 3):
        e2e.enqueue(id_)
    wait_for(lambda: len(e2e.runs()) == 3, "the first three tasks")
    wait_for(lambda: e2e.messages() == [], "their acks")
    how, killed = restart_server_or_terminate(e2e.group.application_name)
    assert how == "restart" or killed >= 1
    for id_ in (4, 5, 6):
        e2e.enqueue(id_)
    wait_for(lambda: len(e2e.runs()) >= 6, "the tasks sent after the restart")
    wait_for(lambda: e2e.messages() == [], "their acks")
    assert worker.running, worker.output()
    assert worker.stop(signal.SIGTERM) == 0, worker.output()
    assert sorted({run["id"] for run in e2e.runs()}) == [1, 2, 3, 4, 5, 6]
    assert "reconnecting in" in worker.output()


def test_a_receiver_connected_with_queue_sender_hears_the_worker_process(e2e: E2E) -> None:
    # The worker reads its queue's name from its command line: a string
    # equal to the receiver's literal, never the same object by itself.
    e2e.enqueue(1)
    assert e2e.start("--burst").wait() == 0
    heard = json_lines(e2e.tmp / "runs.jsonl.signals")
    assert heard == [{"sender": "e2e", "key": "e2e:1", "attempts": 1}]


@pytest.mark.parametrize(("verbosity", "batch_lines"), [("0", 0), ("1", 1), ("2", 1)])
def test_the_recommended_logging_respects_verbosity_and_prints_each_record_once(
    e2e: E2E, verbosity: str, batch_lines: int
) -> None:
    e2e.enqueue(1)
    env = {
        "TASKCLAIM_E2E_QUEUES": postgres_queues("e2e", e2e.options()),
        "TASKCLAIM_E2E_DOCS_LOGGING": "1",
    }
    worker = e2e.group.start("e2e", "--burst", "--wait", "0", "-v", verbosity, env=env)
    assert worker.wait() == 0, worker.output()
    output = worker.output()
    logged = [line for line in output.splitlines() if " INFO " in line]
    batches = [line for line in logged if "1 received, 1 ok" in line]
    assert len(batches) == batch_lines, output
    # In the project's format, which names the logger.
    assert all(" INFO astral_taskclaim." in line for line in logged), output


def test_a_retry_is_not_delivered_before_its_delay(e2e: E2E) -> None:
    # Scale 0.05: the first retry waits 30 s x 0.05 = 1.5 s.
    worker = e2e.start(delay_scale=0.05)
    e2e.enqueue(1, fail_first=True)
    wait_for(lambda: len(e2e.runs()) == 2, "the retry")
    wait_for(lambda: e2e.messages() == [], "its ack")
    first, second = e2e.runs()
    assert second["at"] - first["at"] >= 1.5
    assert worker.stop(signal.SIGTERM) == 0, worker.output()
    assert "retried" in worker.output()
