"""``manage.py taskclaim_grants``: prints the SQL granting the service role
the project's own tables."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import connections

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.db import roles
from astral_taskclaim.db.grants import project_grants
from astral_taskclaim.management.base import (
    AppCommand,
    add_database_argument,
    database_argument,
)


class Command(AppCommand):
    help = (
        "Prints the SQL that grants the service role (TASKCLAIM_SERVICE_ROLE, or --role) "
        "SELECT, INSERT, UPDATE and DELETE on the tables of every installed app but "
        "astral_taskclaim, USAGE on their sequences, and the same by default on those "
        "later migrations create; run it as the role that runs migrate (--owner). "
        "migrate grants astral_taskclaim's own objects itself."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--role", default=None, help="The role to grant (default: TASKCLAIM_SERVICE_ROLE)."
        )
        parser.add_argument(
            "--owner",
            default=None,
            help="The role that runs migrate and owns the tables (default: the connected user).",
        )
        add_database_argument(parser)

    def run(self, options: dict[str, Any]) -> None:
        connection = connections[database_argument(options) or app_settings.DATABASE]
        role = options["role"] or app_settings.SERVICE_ROLE
        if not role:
            raise CommandError("No role to grant: pass --role or set TASKCLAIM_SERVICE_ROLE.")
        named = {"--role" if options["role"] else "TASKCLAIM_SERVICE_ROLE": role}
        if options["owner"]:
            named["--owner"] = options["owner"]
        present = roles.existing_roles(connection, list(named.values()))
        for source, name in named.items():
            if name not in present:
                raise CommandError(roles.how_to_create(source, name))
        self.stdout.write(project_grants(connection, role, owner=options["owner"]), ending="")
