"""Worker processes (``manage.py consume_claimed``) and the run table their
task writes, for the crash and database-fault tests.

Each worker is a separate ``python -m django`` process on
:mod:`tests.reliability.settings`, started, stopped and killed with
:mod:`tests.workerkit`. Its log goes to a JSON lines file
(:meth:`~tests.workerkit.WorkerProcess.events`).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from django.db import connection

from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.queues.postgres import PostgresQueue
from tests.claimkit import raw_connection
from tests.reliability.workerapp.tasks import CHANNEL, RUNS_TABLE
from tests.workerkit import WorkerGroup, WorkerProcess, postgres_queues, worker_env

SETTINGS = "tests.reliability.settings"


def subprocess_env(application_name: str, **extra: str) -> dict[str, str]:
    """The environment of a subprocess on the reliability settings."""
    return worker_env(SETTINGS, application_name, **extra)


@dataclass
class Fleet:
    """A test's queue, run table and worker processes."""

    tmp: Path
    queue_name: str = field(default_factory=lambda: f"reliability-{uuid.uuid4().hex}")
    application_name: str = field(default_factory=lambda: f"tc-rel-{uuid.uuid4().hex[:12]}")
    delay_scale: float = 0.01
    max_retries: int = 3
    visibility_timeout: float = 2.0
    #: The worker processes run the task as an ``async def`` one.
    asynchronous: bool = False
    #: The worker processes run the trailing-runs test's task instead.
    trailing: bool = False
    #: The worker processes run the concurrency-limit test's task instead.
    limited: bool = False
    group: WorkerGroup = field(init=False)

    def __post_init__(self) -> None:
        self.group = WorkerGroup(self.tmp, SETTINGS, self.application_name)

    @property
    def workers(self) -> list[WorkerProcess]:
        return self.group.workers

    def options(self) -> dict[str, Any]:
        return {
            "queue_name": self.queue_name,
            "visibility_timeout": self.visibility_timeout,
            "poll_interval": 0.2,
        }

    def queue(self) -> PostgresQueue:
        return PostgresQueue("reliability", options=self.options())

    def enqueue(
        self, tasks: list[dict[str, Any]], *, window_seconds: float = 600
    ) -> dict[int, str]:
        """Enqueues each task under key ``reliability:<id>``; id → token."""
        queue = self.queue()
        tokens = {}
        for task in tasks:
            token = enqueue_claimed(
                queue, f"reliability:{task['id']}", task, window_seconds=window_seconds
            )
            assert token is not None
            tokens[task["id"]] = token
        return tokens

    def start(self, *args: str, prefix: Sequence[str] = ()) -> WorkerProcess:
        env = {
            "TASKCLAIM_RELIABILITY_QUEUES": postgres_queues("reliability", self.options()),
            "TASKCLAIM_RELIABILITY_DELAY_SCALE": str(self.delay_scale),
            "TASKCLAIM_RELIABILITY_MAX_RETRIES": str(self.max_retries),
        }
        if self.asynchronous:
            env["TASKCLAIM_RELIABILITY_ASYNC"] = "1"
        if self.trailing:
            env["TASKCLAIM_RELIABILITY_TRAILING"] = "1"
        if self.limited:
            env["TASKCLAIM_RELIABILITY_LIMITED"] = "1"
        return self.group.start(
            "reliability",
            *args,
            env=env,
            events_variable="TASKCLAIM_RELIABILITY_EVENTS",
            prefix=prefix,
        )

    def running(self) -> list[WorkerProcess]:
        return self.group.running()

    def events(self) -> Counter[str]:
        """How often each event was logged, over every worker so far."""
        return Counter(
            entry["event"] for worker in self.workers for entry in worker.events() if entry["event"]
        )

    def messages_left(self) -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM taskclaim.message WHERE queue = %s", [self.queue_name]
            )
            row = cursor.fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.group.close()


def runs() -> dict[int, list[str]]:
    """Task id → the outcomes of its runs, in order."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT task_id, outcome FROM {RUNS_TABLE} ORDER BY id")
        found: dict[int, list[str]] = {}
        for task_id, outcome in cursor.fetchall():
            found.setdefault(task_id, []).append(outcome)
    return found


class RunListener:
    """A LISTEN on the run channel: yields the pid of each worker that
    recorded a run, as the runs commit."""

    def __init__(self) -> None:
        self.connection: psycopg.Connection[Any] = raw_connection()
        self.connection.execute(f"LISTEN {CHANNEL}")

    def next(self, timeout: float) -> int | None:
        """The pid of the next run, or ``None`` after ``timeout`` seconds."""
        for notify in self.connection.notifies(timeout=timeout, stop_after=1):
            return int(notify.payload)
        return None

    def close(self) -> None:
        self.connection.close()
