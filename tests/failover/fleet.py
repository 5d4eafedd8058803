"""The failover tests' subprocesses and what they recorded: ``consume_claimed``
workers (with ``--concurrency``) and a ``taskclaim_relay``, started with
:mod:`tests.workerkit` on :mod:`tests.failover.settings` and the multi-host
URL, the runs their tasks wrote to files, what reached SQS, and a count of
their log records per reconnect.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.support import json_lines
from tests.queues.servers import MotoSQS
from tests.workerkit import WorkerGroup, WorkerProcess

__all__ = ["DRAIN_DEADLINE", "LOOK_EVERY", "Fleet", "LogCount", "queues_config", "sqs_deliveries"]

SETTINGS = "tests.failover.settings"
#: Longest wait for the load to drain once the failovers are over.
DRAIN_DEADLINE = 150.0
#: How often the run files and SQS are read while draining (the subprocesses
#: have no notification the test could wait on).
LOOK_EVERY = 0.25
#: Short leases, so a batch whose settlement a failover lost comes back soon.
POSTGRES_OPTIONS = {"visibility_timeout": 5, "poll_interval": 0.5}
#: Events that mark one reconnect of a worker thread or the relay.
RECONNECTS = {"worker.database_error", "relay.database_error", "db.read_only_server"}


def queues_config(sqs: MotoSQS | None, sqs_url: str | None) -> dict[str, Any]:
    """``TASKCLAIM_QUEUES`` of the test and its subprocesses: ``jobs`` (the
    claimed task), ``default`` (Django Tasks), and with ``sqs`` ``outbox``,
    an SQS queue sent to through the outbox."""
    postgres = "astral_taskclaim.queues.postgres.PostgresQueue"
    config: dict[str, Any] = {
        alias: {"BACKEND": postgres, "OPTIONS": {"queue_name": f"failover-{alias}", **options}}
        for alias, options in (("jobs", POSTGRES_OPTIONS), ("default", POSTGRES_OPTIONS))
    }
    if sqs is not None and sqs_url is not None:
        config["outbox"] = {
            "BACKEND": "astral_taskclaim.queues.sqs.SQSQueue",
            "OPTIONS": sqs.options(sqs_url, outbox=True),
        }
    return config


@dataclass(frozen=True)
class LogCount:
    """One subprocess's log: reconnect events, records at WARNING and above,
    records carrying a traceback, and tracebacks printed outside the log."""

    name: str
    reconnects: int
    warnings: int
    with_traceback: int
    printed_tracebacks: int

    def storm(self) -> str | None:
        """What is wrong, if this looks like a traceback storm: more than
        three warnings per reconnect (plus a few for starting and stopping),
        or more tracebacks than reconnects, logged or printed (the command
        prints the app's records too when no console handler has them)."""
        if self.warnings > 3 * self.reconnects + 5:
            return f"{self.name}: {self.warnings} warnings for {self.reconnects} reconnects"
        if self.with_traceback > self.reconnects:
            return f"{self.name}: {self.with_traceback} tracebacks, {self.reconnects} reconnects"
        if self.printed_tracebacks > self.reconnects:
            return f"{self.name}: {self.printed_tracebacks} tracebacks printed"
        return None


@dataclass
class Fleet:
    """The workers and relay of one test, their files in ``tmp``."""

    tmp: Path
    config: dict[str, Any]
    group: WorkerGroup = field(init=False)

    def __post_init__(self) -> None:
        self.group = WorkerGroup(self.tmp, SETTINGS, "tc-failover")
        (self.tmp / "runs").mkdir()

    def _env(self) -> dict[str, str]:
        return {
            "TASKCLAIM_FAILOVER_QUEUES": json.dumps(self.config),
            "TASKCLAIM_FAILOVER_RUNS": str(self.tmp / "runs"),
        }

    def start_workers(self, count: int, concurrency: int) -> None:
        """``count`` processes of ``consume_claimed jobs default --concurrency N``."""
        for _ in range(count):
            self.group.start(
                "jobs", "default", "--concurrency", str(concurrency), "--no-schedules",
                env=self._env(), events_variable="TASKCLAIM_FAILOVER_EVENTS",
            )  # fmt: skip

    def start_relay(self) -> None:
        """``taskclaim_relay outbox``, backing off 2 s at most."""
        self.group.start(
            "outbox", "--poll-interval", "0.2", "--max-backoff", "2",
            env=self._env(), events_variable="TASKCLAIM_FAILOVER_EVENTS",
            command="taskclaim_relay",
        )  # fmt: skip

    @property
    def processes(self) -> list[WorkerProcess]:
        return self.group.workers

    def runs(self) -> Counter[tuple[str, int]]:
        """(kind, seq) → how many times it ran, over every process so far."""
        return Counter(
            (entry["kind"], entry["seq"])
            for path in (self.tmp / "runs").glob("runs-*.jsonl")
            for entry in json_lines(path)
        )

    def await_runs(self, wanted: set[tuple[str, int]], deadline: float) -> set[tuple[str, int]]:
        """Until every (kind, seq) of ``wanted`` has run, or the monotonic
        ``deadline``; those that did not."""
        while (missing := wanted - set(self.runs())) and time.monotonic() < deadline:
            time.sleep(LOOK_EVERY)
        return missing

    def stop(self) -> list[str]:
        """SIGTERM to each process still running; a line for each that did
        not exit 0."""
        for process in self.group.running():
            process.send(signal.SIGTERM)
        return [
            f"{process.pid} exited {status}:\n{process.output()[-3000:]}"
            for process in self.processes
            if (status := process.wait()) != 0
        ]

    def log_counts(self) -> list[LogCount]:
        counts = []
        for number, process in enumerate(self.processes):
            events = process.events()
            counts.append(
                LogCount(
                    f"process {number} ({process.pid})",
                    reconnects=sum(e["event"] in RECONNECTS for e in events),
                    warnings=sum(e["level"] in {"WARNING", "ERROR", "CRITICAL"} for e in events),
                    with_traceback=sum("exception" in e for e in events),
                    printed_tracebacks=process.output().count("Traceback (most recent call last)"),
                )
            )
        return counts

    def close(self) -> None:
        self.group.close()


def sqs_deliveries(sqs: MotoSQS, url: str, wanted: set[int], deadline: float) -> Counter[int]:
    """Receives (and deletes) what reached the SQS queue at ``url`` until
    every seq of ``wanted`` has, or the monotonic ``deadline``; seq → copies."""
    client, seen = sqs.client(), Counter[int]()
    while not wanted <= set(seen) and time.monotonic() < deadline:
        answer = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        for message in answer.get("Messages", []):
            seen[json.loads(message["Body"])["task"]["seq"]] += 1
            client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return seen
