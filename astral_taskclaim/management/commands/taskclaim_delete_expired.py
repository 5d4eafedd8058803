"""``manage.py taskclaim_delete_expired``: pg_cron's hourly job, for
deployments without pg_cron."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from ...maintenance import delete_expired


class Command(BaseCommand):
    help = (
        "Deletes expired claims in batches, each its own short transaction, so claims are "
        "never blocked for long. Schedule it hourly where pg_cron does not run."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size",
            type=int,
            default=1000,
            help="Claims deleted per transaction (default 1000).",
        )
        parser.add_argument(
            "--database", default=None, help="Database alias (default: TASKCLAIM_DATABASE)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["database"] is not None and options["database"] not in connections.settings:
            raise CommandError(f"--database: unknown database alias {options['database']!r}")
        try:
            deleted = delete_expired(batch_size=options["batch_size"], using=options["database"])
        except (TypeError, ValueError) as error:
            raise CommandError(f"--batch-size: {error}") from error
        self.stdout.write(f"Deleted {deleted} expired claim{'' if deleted == 1 else 's'}.")
