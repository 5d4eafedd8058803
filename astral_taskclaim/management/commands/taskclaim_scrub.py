"""``manage.py taskclaim_scrub``: empties the claim table of a copied database."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from astral_taskclaim.claims.maintenance import scrub
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.management.base import AppCommand, add_database_argument, database_argument


class Command(AppCommand):
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
        add_database_argument(parser)

    def run(self, options: dict[str, Any]) -> None:
        alias = database_argument(options) or app_settings.DATABASE
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
