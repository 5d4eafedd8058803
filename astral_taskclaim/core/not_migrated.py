"""Telling a database the app's migrations have not reached from any other error.

Before ``manage.py migrate`` has run, every claim or queue statement fails
with ``relation "taskclaim.claim" does not exist`` deep inside psycopg.
:func:`explains_missing_tables` turns that into :class:`NotMigratedError`,
whose message says what to do; :func:`missing_tables` asks a database
up front (the worker at start, ``manage.py check --database``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import psycopg
from django.apps import apps
from django.db import ProgrammingError, connections

__all__ = ["NotMigratedError", "ensure_migrated", "missing_tables", "not_migrated"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

#: The tables the app's migrations create and its statements need.
_TABLES = ("taskclaim.claim", "taskclaim.message")

# SQLSTATEs of a missing table, schema or function.
_MISSING = (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName)
_SCHEMAS = ("taskclaim.", '"taskclaim"', "slug.")


class NotMigratedError(ProgrammingError):
    """The app's tables are missing: ``manage.py migrate`` has not run on
    this database. A ``django.db.ProgrammingError``, so code catching
    database errors still catches it."""


def advice(alias: str | None) -> str:
    """What to run: ``manage.py migrate``, naming a database other than the
    default; first adding the app to ``INSTALLED_APPS`` if it is missing
    there, as ``migrate`` then has nothing of the app's to apply."""
    flag = f" --database {alias}" if alias and alias != "default" else ""
    if not apps.is_installed("astral_taskclaim"):
        return f'add "astral_taskclaim" to INSTALLED_APPS, then run `manage.py migrate{flag}`'
    return f"run `manage.py migrate{flag}`"


def not_migrated(alias: str | None, detail: str) -> NotMigratedError:
    """The error for database ``alias`` (``None``: unknown), ``detail`` saying what is missing."""
    where = f" in database {alias!r}" if alias else ""
    return NotMigratedError(
        f"astral_taskclaim is not migrated{where} ({detail}): {advice(alias)} first"
    )


def _is_missing_table(error: BaseException) -> bool:
    """Whether ``error`` (or what it wraps) says one of the app's tables is missing."""
    cause = error if isinstance(error, psycopg.Error) else error.__cause__
    return isinstance(cause, _MISSING) and any(name in str(cause) for name in _SCHEMAS)


def explains_missing_tables(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorates a function running the app's SQL: a missing table raises
    :class:`NotMigratedError` (chained to the database's error) instead."""

    @functools.wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return function(*args, **kwargs)
        except ProgrammingError as error:
            if isinstance(error, NotMigratedError) or not _is_missing_table(error):
                raise
            first_line = str(error.__cause__ or error).splitlines()[0]
            raise not_migrated(None, first_line) from error

    return wrapper


def missing_tables(alias: str) -> list[str]:
    """The app's tables absent from database ``alias`` (empty: migrated)."""
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT name FROM unnest(%s::text[]) AS name WHERE to_regclass(name) IS NULL",
            [list(_TABLES)],
        )
        return [row[0] for row in cursor.fetchall()]


def ensure_migrated(alias: str) -> None:
    """:class:`NotMigratedError` naming ``alias`` if its tables are missing."""
    missing = missing_tables(alias)
    if missing:
        raise not_migrated(alias, f"{', '.join(missing)} missing")
