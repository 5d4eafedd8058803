"""What the app's management commands share: a ``--database`` option
checked before anything runs, seconds read from the command line, and one
way of turning the errors the app raises for a database or settings it
cannot use into a ``CommandError``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from astral_taskclaim.core.not_migrated import NotMigratedError


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


def seconds_type(check: Callable[..., float]) -> Callable[[str], float]:
    """An argparse ``type``: the text as a number of seconds that
    ``check`` (a :mod:`~astral_taskclaim.core.validation` helper) accepts.
    "300" stays an int, so a body says 300 as a TypeScript producer would
    (not 300.0). argparse names the option before an error."""

    def parse(text: str) -> float:
        try:
            seconds: float = int(text)
        except ValueError:
            try:
                seconds = float(text)
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"must be a number of seconds, got {text!r}"
                ) from None
        try:
            return check(seconds, name="")
        except (TypeError, ValueError) as error:
            raise argparse.ArgumentTypeError(str(error).strip()) from None

    return parse


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
