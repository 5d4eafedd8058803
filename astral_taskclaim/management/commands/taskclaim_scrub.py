"""``manage.py taskclaim_scrub``: empties the claim table of a copied database."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from ...conf import app_settings
from ...maintenance import scrub


class Command(BaseCommand):
    help = (
        "Empties taskclaim.claim, for a copy (snapshot) of a database whose queued "
        "messages stayed in the environment it came from. Asks first unless --no-input."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--no-input",
            "--noinput",
            action="store_false",
            dest="interactive",
            help="Do not ask for confirmation.",
        )
        parser.add_argument(
            "--database", default=None, help="Database alias (default: TASKCLAIM_DATABASE)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["database"] is not None and options["database"] not in connections.settings:
            raise CommandError(f"--database: unknown database alias {options['database']!r}")
        alias = options["database"] or app_settings.DATABASE
        if options["interactive"]:
            answer = input(
                f"This deletes every claim in taskclaim.claim of database {alias!r}; keys "
                "claimed now can be enqueued again at once.\nType 'yes' to continue: "
            )
            if answer.strip().lower() != "yes":
                self.stdout.write("Scrub cancelled.")
                return
        scrub(using=alias)
        self.stdout.write(f"Emptied taskclaim.claim of database {alias!r}.")
