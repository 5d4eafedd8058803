"""``manage.py taskclaim_relay QUEUE``: sends a remote queue's outbox rows to
its service (see :mod:`astral_taskclaim.relay`)."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ...conf import app_settings
from ...relay import FIRST_BACKOFF, MAX_BACKOFF, POLL_INTERVAL, Relay
from .consume_claimed import console_log


class Command(BaseCommand):
    help = (
        "Sends the outbox rows of QUEUE (a Cloudflare or SQS queue with OPTIONS outbox=True) "
        "to its service in batches, deleting them once accepted; backs off through outages "
        "and rate limits. Several relays may run at once. The first SIGTERM/SIGINT finishes "
        "the batch in hand and exits 0; a second exits at once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queue", help="A TASKCLAIM_QUEUES alias with an outbox.")
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
            "--burst", action="store_true", help="Send what the outbox holds, then exit 0."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        queue = options["queue"]
        known = list(app_settings.QUEUES)
        if queue not in known:
            raise CommandError(
                f"unknown queue {queue!r}; TASKCLAIM_QUEUES has: {', '.join(known) or 'none'}"
            )
        try:
            relay = Relay(
                queue,
                poll_interval=options["poll_interval"],
                max_backoff=options["max_backoff"],
                burst=options["burst"],
            )
        except (ImproperlyConfigured, ValueError) as error:
            raise CommandError(str(error)) from error
        errors = [message.msg for message in relay.backend.check() if message.is_serious()]
        if errors:
            raise CommandError("; ".join(errors))
        with console_log(self.stderr, options["verbosity"]), relay.stopper.signal_handlers():
            stats = relay.run()
        if options["verbosity"] >= 1:
            self.stdout.write(
                f"{queue}: {stats.sent} sent in {stats.batches} batches, "
                f"{stats.send_failures} failed sends, {stats.database_errors} database errors"
            )


def _seconds(text: str) -> float:
    """A number of seconds above 0 (argparse names the option on error)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not 0 < value < 1e6:
        raise argparse.ArgumentTypeError(f"must be above 0 and below 1e6, got {text!r}")
    return value
