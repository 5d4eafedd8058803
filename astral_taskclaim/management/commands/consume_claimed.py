"""``manage.py consume_claimed QUEUE``: a worker for one queue's claimed task."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper
from django.db import DatabaseError

from ...conf import app_settings
from ...migrated import NotMigratedError, ensure_migrated
from ...queues import QueueError, unknown_queue
from ...worker import TaskRun, Worker

#: Console log level by ``--verbosity``: 0 warnings, 1 a line per batch, 2+ debug
#: (and, on stdout, a line per task run).
LEVELS = {0: logging.WARNING, 1: logging.INFO}


class Command(BaseCommand):
    help = (
        "Consumes QUEUE with its registered claimed task: runs, retries and gives up as "
        "consume_claimed does. The first SIGTERM/SIGINT finishes the current message, settles "
        "the batch and exits 0; a second exits at once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queue", help="A TASKCLAIM_QUEUES alias.")
        parser.add_argument(
            "--batch-size", type=int, default=10, help="Most messages per batch (default 10)."
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
            "--max-messages", type=int, default=None, help="Exit after receiving this many."
        )
        parser.add_argument(
            "--metrics-port",
            type=int,
            default=None,
            help="Serve Prometheus metrics on this port at /metrics (needs the "
            "'prometheus' extra).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        queue = options["queue"]
        if queue not in app_settings.QUEUES:
            raise CommandError(unknown_queue(queue))
        verbosity = options["verbosity"]
        try:
            worker = Worker(
                queue,
                batch_size=options["batch_size"],
                wait=options["wait"],
                burst=options["burst"],
                max_messages=options["max_messages"],
                on_run=self._print_run if verbosity >= 2 else None,
            )
        except LookupError as error:
            raise CommandError(str(error.args[0])) from error
        except (ImproperlyConfigured, TypeError, ValueError) as error:
            raise CommandError(str(error)) from error
        errors = [message.msg for message in worker.backend.check() if message.is_serious()]
        if errors:
            raise CommandError("; ".join(errors))
        _ensure_migrated(worker)
        if options["metrics_port"] is not None:
            _serve_metrics(worker, options["metrics_port"])
        with self._console_log(verbosity), worker.signal_handlers():
            try:
                stats = worker.run()
            except NotMigratedError as error:
                raise CommandError(str(error)) from error
        if verbosity >= 1:
            self.stdout.write(str(stats))
        if options["burst"]:
            self.stdout.write(burst_report(worker))

    def _print_run(self, run: TaskRun) -> None:
        self.stdout.write(str(run))

    @contextmanager
    def _console_log(self, verbosity: int) -> Iterator[None]:
        """Shows the app's log records at ``verbosity`` on stderr while running."""
        level = LEVELS.get(verbosity, logging.DEBUG)
        handler = logging.StreamHandler(_Unstyled(self.stderr))
        handler.setLevel(level)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger = logging.getLogger("astral_taskclaim")
        previous = logger.level
        if logger.getEffectiveLevel() > level:
            logger.setLevel(level)
        logger.addHandler(handler)
        try:
            yield
        finally:
            logger.removeHandler(handler)
            logger.setLevel(previous)


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


def _serve_metrics(worker: Worker, port: int) -> None:
    try:
        from ...metrics import serve, worker_registry
    except ImportError as error:
        raise CommandError(str(error)) from error
    registry, on_run = worker_registry(worker)
    previous = worker.on_run

    def both(run: TaskRun) -> None:
        on_run(run)
        if previous is not None:
            previous(run)

    worker.on_run = both
    try:
        serve(registry, port)
    except OSError as error:
        raise CommandError(f"--metrics-port {port}: {error}") from error


def burst_report(worker: Worker) -> str:
    """What a ``--burst`` run did, and what it leaves behind on its queue."""
    stats = worker.stats
    text = (
        f"burst done: ran {stats.messages} messages ({stats.ok} ok, {stats.retried} retried, "
        f"{stats.failed} failed, {stats.malformed} malformed, {stats.unparseable} unparseable); "
        f"{stats.returned} handed back unrun; {stats.left_leased} left leased (settlement "
        "not written: delivered again when their leases run out)"
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


class _Unstyled:
    """A stream writing to a command's stderr without its error colour: log
    lines of every level are not errors."""

    def __init__(self, wrapper: OutputWrapper) -> None:
        self.wrapper = wrapper

    def write(self, text: str) -> None:
        self.wrapper.write(text, style_func=str, ending="")

    def flush(self) -> None:
        self.wrapper.flush()
