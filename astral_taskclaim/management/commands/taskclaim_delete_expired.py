"""``manage.py taskclaim_delete_expired``: pg_cron's hourly job, for
deployments where neither pg_cron nor the workers' upkeep deletes expired
claims."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import connections

from astral_taskclaim.claims.maintenance import delete_expired
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.logtext import counted
from astral_taskclaim.db import cron
from astral_taskclaim.management.base import AppCommand, add_database_argument, database_argument


class Command(AppCommand):
    help = (
        "Deletes expired claims in batches, each its own short transaction, so claims are "
        "never blocked for long. pg_cron's job, or without pg_cron the consume_claimed "
        "workers (TASKCLAIM_UPKEEP), do it hourly; schedule this command hourly only where "
        "neither does."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size",
            type=int,
            default=1000,
            help="Claims deleted per transaction (default 1000).",
        )
        add_database_argument(parser)
        parser.add_argument(
            "--schedule",
            action="store_true",
            help="Instead of deleting, schedule pg_cron's hourly job for the database (as the "
            "migration does; check astral_taskclaim.W032 asks for it), and say whether it runs.",
        )

    def run(self, options: dict[str, Any]) -> None:
        database = database_argument(options)
        if options["schedule"]:
            self._schedule(database or app_settings.DATABASE)
            return
        try:
            deleted = delete_expired(batch_size=options["batch_size"], using=database)
        except (TypeError, ValueError) as error:
            raise CommandError(f"--batch-size: {error}") from error
        self.stdout.write(f"Deleted {counted(deleted, 'expired claim')}.")

    def _schedule(self, alias: str) -> None:
        connection = connections[alias]
        with connection.schema_editor() as editor:
            cron.schedule(editor)
        if not cron.has_cleanup_job(connection):
            raise CommandError(
                f"no pg_cron job cleans database {connection.settings_dict['NAME']}: pg_cron is "
                "not loaded or refused (see the warning above). Where it is not loaded the "
                "workers delete expired claims (TASKCLAIM_UPKEEP); otherwise schedule this "
                "command hourly"
            )
        self.stdout.write(f"pg_cron deletes expired claims in {connection.settings_dict['NAME']}.")
