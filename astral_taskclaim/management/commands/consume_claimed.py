"""``manage.py consume_claimed QUEUE``: a worker for one queue's claimed task."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper

from ...conf import app_settings
from ...worker import Worker

#: Console log level by ``--verbosity``: 0 warnings, 1 a line per batch, 2+ debug.
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

    def handle(self, *args: Any, **options: Any) -> None:
        queue = options["queue"]
        known = list(app_settings.QUEUES)
        if queue not in known:
            raise CommandError(
                f"unknown queue {queue!r}; TASKCLAIM_QUEUES has: {', '.join(known) or 'none'}"
            )
        try:
            worker = Worker(
                queue,
                batch_size=options["batch_size"],
                wait=options["wait"],
                burst=options["burst"],
                max_messages=options["max_messages"],
            )
        except LookupError as error:
            raise CommandError(str(error.args[0])) from error
        except (ImproperlyConfigured, TypeError, ValueError) as error:
            raise CommandError(str(error)) from error
        errors = [message.msg for message in worker.backend.check() if message.is_serious()]
        if errors:
            raise CommandError("; ".join(errors))
        with console_log(self.stderr, options["verbosity"]), worker.signal_handlers():
            stats = worker.run()
        if options["verbosity"] >= 1:
            self.stdout.write(
                f"{queue}: {stats.received} received, {stats.ok} ok, {stats.retried} retried, "
                f"{stats.failed} failed, {stats.malformed} malformed, "
                f"{stats.unparseable} unparseable"
            )


@contextmanager
def console_log(stderr: OutputWrapper, verbosity: int) -> Iterator[None]:
    """Shows the app's log records at ``verbosity`` on a command's
    ``stderr`` while running."""
    level = LEVELS.get(verbosity, logging.DEBUG)
    handler = logging.StreamHandler(_Unstyled(stderr))
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


class _Unstyled:
    """A stream writing to a command's stderr without its error colour: log
    lines of every level are not errors."""

    def __init__(self, wrapper: OutputWrapper) -> None:
        self.wrapper = wrapper

    def write(self, text: str) -> None:
        self.wrapper.write(text, style_func=str, ending="")

    def flush(self) -> None:
        self.wrapper.flush()
