"""``manage.py taskclaim_relay QUEUE``: sends a remote queue's outbox rows to
its service (see :mod:`astral_taskclaim.worker.relay`)."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from django.core.management.base import CommandParser

from astral_taskclaim.core.validation import validate_number
from astral_taskclaim.management.base import seconds_type
from astral_taskclaim.management.loop import QueueLoopCommand
from astral_taskclaim.worker.relay import FIRST_BACKOFF, MAX_BACKOFF, POLL_INTERVAL, Relay

#: What the relay takes for its waits: above 0, below 1e6 seconds.
_seconds = seconds_type(
    partial(
        validate_number,
        low_open=True,
        high=math.nextafter(1e6, 0),
        expected="above 0 and below 1e6",
    )
)


class Command(QueueLoopCommand[Relay]):
    help = (
        "Sends the outbox rows of QUEUE (a Cloudflare or SQS queue with OPTIONS outbox=True) "
        "to its service in batches, deleting them once accepted; backs off through outages "
        "and rate limits. Several relays may run at once. The first SIGTERM/SIGINT finishes "
        "the batch in hand and exits 0; a second exits at once."
    )
    queue_help = "A TASKCLAIM_QUEUES alias with an outbox."

    def add_loop_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--poll-interval",
            type=_seconds,
            default=POLL_INTERVAL,
            help=f"Seconds between looks at an empty outbox (default {POLL_INTERVAL:g}).",
        )
        parser.add_argument(
            "--max-backoff",
            type=_seconds,
            default=MAX_BACKOFF,
            help="Longest wait after a failed send, unless the service asks for longer "
            f"(default {MAX_BACKOFF:g}; the first wait is {FIRST_BACKOFF:g}).",
        )
        parser.add_argument(
            "--burst",
            action="store_true",
            help="Send the rows due, then exit 0 (deferred and backing-off rows stay).",
        )

    def make(self, queue: str, options: dict[str, Any]) -> Relay:
        return Relay(
            queue,
            poll_interval=options["poll_interval"],
            max_backoff=options["max_backoff"],
            burst=options["burst"],
        )

    def run_loop(self, loop: Relay, options: dict[str, Any]) -> None:
        stats = loop.run()
        if options["verbosity"] >= 1:
            self.stdout.write(
                f"{loop.queue}: {stats.sent} sent in {stats.batches} batches, "
                f"{stats.send_failures} failed sends, {stats.database_errors} database errors, "
                f"{stats.set_aside} set aside"
            )
