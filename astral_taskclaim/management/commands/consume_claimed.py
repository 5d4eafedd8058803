"""``manage.py consume_claimed [QUEUE ...]``: a worker for the claimed tasks
of some queues, or of every configured one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import DatabaseError

from astral_taskclaim.consumer.summary import TaskRun
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.not_migrated import NotMigratedError, ensure_migrated
from astral_taskclaim.management.loop import QueueLoopCommand
from astral_taskclaim.queues import QueueError
from astral_taskclaim.schedules import Scheduler
from astral_taskclaim.worker.group import WorkerGroup, consumed_queues
from astral_taskclaim.worker.loop import Worker

__all__ = ["Command"]


class Command(QueueLoopCommand[WorkerGroup]):
    help = (
        "Consumes each QUEUE named, or every TASKCLAIM_QUEUES alias with a claimed task when "
        "none is, with its registered claimed task: runs, retries and gives up as "
        "consume_claimed does. The first SIGTERM/SIGINT finishes the running messages, hands "
        "back those not started, settles and exits 0; a second exits at once."
    )
    queue_help = "TASKCLAIM_QUEUES aliases (default: every one with a claimed task)."
    many_queues = True

    def add_loop_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--concurrency",
            type=int,
            default=1,
            help="Messages run side by side per queue, each on a thread with its own "
            "database connection (default 1).",
        )
        parser.add_argument(
            "--queue-concurrency",
            action="append",
            default=[],
            metavar="QUEUE=N",
            help="Another --concurrency for one queue (repeatable).",
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=None,
            help="Most messages per batch (default: 10 per thread, from 10 to 100, within "
            "what the queue takes).",
        )
        parser.add_argument(
            "--wait",
            type=float,
            default=1.0,
            help="Seconds one receive waits for a message (default 1); with --burst, "
            "exit after waiting this long for nothing.",
        )
        parser.add_argument(
            "--burst",
            action="store_true",
            help="Drain the queue, then exit 0 (delayed retries stay queued).",
        )
        parser.add_argument(
            "--max-messages",
            type=int,
            default=None,
            help="Exit after receiving this many (from each queue).",
        )
        parser.add_argument(
            "--metrics-port",
            type=int,
            default=None,
            help="Serve Prometheus metrics on this port at /metrics (needs the "
            "'prometheus' extra).",
        )
        parser.add_argument(
            "--metrics-address",
            default="127.0.0.1",
            help="The address --metrics-port listens on (default 127.0.0.1, this machine "
            "only; 0.0.0.0 or :: for every interface).",
        )
        parser.add_argument(
            "--no-schedules",
            action="store_true",
            help="Take no part in enqueueing the schedules' slots (periodic tasks).",
        )

    def make(self, queue: list[str], options: dict[str, Any]) -> WorkerGroup:
        return WorkerGroup(
            consumed_queues(queue),
            caps=_caps(options["queue_concurrency"]),
            concurrency=options["concurrency"],
            batch_size=options["batch_size"],
            wait=options["wait"],
            burst=options["burst"],
            max_messages=options["max_messages"],
            # --verbosity 2 and up: a line per task run on stdout.
            on_run=self._print_run if options["verbosity"] >= 2 else None,
            scheduler=None if options["no_schedules"] else Scheduler(),
        )

    def prepare(self, loop: WorkerGroup, options: dict[str, Any]) -> None:
        for worker in loop.workers:
            _ensure_migrated(worker)
        if options["metrics_port"] is not None:
            _serve_metrics(loop.workers, options["metrics_port"], options["metrics_address"])

    def run_loop(self, loop: WorkerGroup, options: dict[str, Any]) -> None:
        try:
            loop.run()
        except NotMigratedError as error:
            raise CommandError(str(error)) from error
        for worker in loop.workers:
            if options["verbosity"] >= 1:
                self.stdout.write(str(worker.stats))
            if options["burst"]:
                self.stdout.write(_burst_report(worker))

    def _print_run(self, run: TaskRun) -> None:
        self.stdout.write(str(run))


def _ensure_migrated(worker: Worker) -> None:
    """Exits with "run manage.py migrate" before consuming an unmigrated
    database; a database that cannot be reached is left to the worker's
    reconnecting loop."""
    aliases = {app_settings.DATABASE, getattr(worker.backend, "database", app_settings.DATABASE)}
    try:
        for alias in sorted(aliases):
            ensure_migrated(alias)
    except NotMigratedError as error:
        raise CommandError(str(error)) from error
    except DatabaseError:
        pass


def _caps(pairs: list[str]) -> dict[str, int]:
    """``--queue-concurrency QUEUE=N`` options as a mapping."""
    caps = {}
    for pair in pairs:
        queue, _, count = pair.rpartition("=")
        if not queue or not count.isdigit():
            raise CommandError(f"--queue-concurrency takes QUEUE=N, got {pair!r}")
        caps[queue] = int(count)
    return caps


def _serve_metrics(workers: list[Worker], port: int, address: str) -> None:
    try:  # metrics needs prometheus_client, an optional extra: imported on demand
        from astral_taskclaim.worker.metrics import serve, worker_registry
    except ImportError as error:
        raise CommandError(str(error)) from error
    registry, on_run = worker_registry(*workers)
    for worker in workers:
        previous = worker.on_run
        worker.on_run = on_run if previous is None else _both(on_run, previous)
    try:
        serve(registry, port, address)
    except OSError as error:
        raise CommandError(f"--metrics-port {port} on {address}: {error}") from error


def _burst_report(worker: Worker) -> str:
    """What a ``--burst`` run did, and what it leaves behind on its queue."""
    stats = worker.stats
    text = (
        f"burst done: ran {stats.messages} messages ({stats.counts()}); {stats.returned} handed "
        f"back unrun; {stats.left_leased} left leased (settlement not written: delivered again "
        "when their leases run out)"
    )
    try:
        status = worker.backend.status()
    except (DatabaseError, QueueError):
        return text
    finally:
        worker.backend.close()
    counts = [
        f"{value} {name}"
        for name, value in (
            ("ready", status.ready),
            ("delayed", status.delayed),
            ("leased", status.leased),
        )
        if value is not None
    ]
    return f"{text}; queue now: {', '.join(counts)}" if counts else text


def _both(
    first: Callable[[TaskRun], object], then: Callable[[TaskRun], object]
) -> Callable[[TaskRun], None]:
    def both(run: TaskRun) -> None:
        first(run)
        then(run)

    return both
