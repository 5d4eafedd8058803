"""What the app's small management commands share: a ``--database`` option
checked before anything runs, and one way of turning the errors the app
raises for a database it cannot use into a ``CommandError``.

``consume_claimed``, ``taskclaim_relay`` and ``enqueue_claimed`` keep their
own ``handle()``: they run long or print as they go, and say more.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from astral_taskclaim.core.not_migrated import NotMigratedError

__all__ = ["AppCommand", "add_database_argument", "database_argument"]


def add_database_argument(parser: CommandParser) -> None:
    """Adds ``--database``, the alias to act on (default: ``TASKCLAIM_DATABASE``)."""
    parser.add_argument(
        "--database", default=None, help="Database alias (default: TASKCLAIM_DATABASE)."
    )


def database_argument(options: dict[str, Any]) -> str | None:
    """The ``--database`` alias of ``options`` (``None`` when not given),
    once it names a configured database."""
    alias: str | None = options["database"]
    if alias is not None and alias not in connections.settings:
        raise CommandError(f"--database: unknown database alias {alias!r}")
    return alias


class AppCommand(BaseCommand):
    """A command of the app whose :meth:`run` does the work.

    A database not migrated yet (:class:`~astral_taskclaim.core.not_migrated.NotMigratedError`)
    or settings that cannot be used (``ImproperlyConfigured``) end the command
    with a ``CommandError`` carrying their message, not a traceback.
    """

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            self.run(options)
        except (NotMigratedError, ImproperlyConfigured) as error:
            raise CommandError(str(error)) from error

    def run(self, options: dict[str, Any]) -> None:
        """Does the command's work with its parsed ``options``."""
        raise NotImplementedError
