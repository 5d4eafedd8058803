"""``manage.py taskclaim_delete_task_results``: deletes old Django Task results."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import connections

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.management.base import AppCommand
from astral_taskclaim.tasks_backend.retention import delete_old_results, schedule_job


class Command(AppCommand):
    help = (
        "Deletes Django Task results finished longer ago than "
        "TASKCLAIM_TASK_RESULTS_RETENTION (or --older-than); with --schedule, "
        "(re)schedules the pg_cron job with the current retention instead."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=int,
            default=None,
            help="Seconds; default: TASKCLAIM_TASK_RESULTS_RETENTION.",
        )
        parser.add_argument(
            "--schedule",
            action="store_true",
            help="Schedule pg_cron's cleanup job with the current retention.",
        )

    def run(self, options: dict[str, Any]) -> None:
        connection = connections[app_settings.DATABASE]
        retention = app_settings.TASK_RESULTS_RETENTION
        if options["schedule"]:
            self.stdout.write(schedule_job(connection))
            return
        older_than = options["older_than"]
        if older_than is None:
            if retention is None:
                self.stdout.write("TASKCLAIM_TASK_RESULTS_RETENTION is None: results are kept.")
                return
            older_than = retention
        if older_than < 0:
            raise CommandError(f"--older-than must be from 0 seconds, got {older_than}")
        deleted = delete_old_results(connection, older_than)
        self.stdout.write(f"Deleted {deleted} task results finished over {older_than} s ago.")
