"""The SQL files shipped in ``astral_taskclaim/sql`` and their rendering.

Files are package data, read with :mod:`importlib.resources` so they work
from a wheel or a zip. Role names are only ever inserted as quoted
identifiers (``psycopg.sql.Identifier``); values go in as query parameters.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable

from psycopg import sql

SQL_ROOT = "sql"


def _root() -> Traversable:
    return files("astral_taskclaim") / SQL_ROOT


@cache
def read(path: str) -> str:
    """Text of the SQL file at ``path``, relative to ``astral_taskclaim/sql``."""
    resource = _root().joinpath(*path.split("/"))
    if not resource.is_file():
        raise FileNotFoundError(f"astral_taskclaim/sql/{path} is not a shipped SQL file")
    return resource.read_text(encoding="utf-8")


def all_paths() -> list[str]:
    """Every shipped SQL file, as paths relative to ``astral_taskclaim/sql``."""
    found: list[str] = []

    def walk(node: Traversable, prefix: str) -> None:
        for child in node.iterdir():
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith(".sql"):
                found.append(prefix + child.name)

    walk(_root(), "")
    return sorted(found)


def with_roles(path: str, *, service_role: str) -> sql.Composed:
    """The grants file at ``path`` with ``{service_role}`` as a quoted identifier."""
    return sql.SQL(read(path)).format(service_role=sql.Identifier(service_role))  # type: ignore[arg-type]
