"""The app's packaged SQL files and their rendering.

Each SQL file lives beside the code that runs it, under a family folder
named by the first part of its path: ``taskclaim/claim.sql`` is in
``db/sql``, ``queue/send.sql`` in ``queues/postgres/sql``. :data:`HOMES`
maps each family to its folder, so callers name a file by ``family/file``
wherever it lives.

Files are package data, read with :mod:`importlib.resources` so they work
from a wheel or a zip. Role names are only ever inserted as quoted
identifiers (``psycopg.sql.Identifier``); values go in as query parameters.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable

from psycopg import sql

#: Family of SQL files -> the folder (in the package) holding its folder.
HOMES = {
    "taskclaim": "db/sql",
    "slug": "db/sql",
    "testing": "db/sql",
    "queue": "queues/postgres/sql",
    "tasks": "tasks_backend/sql",
    "admin": "admin/sql",
    "outbox": "queues/sql",
}


def package_path(path: str) -> str:
    """Where the SQL file named ``family/file.sql`` lives inside the
    package, e.g. ``queues/postgres/sql/queue/send.sql``."""
    family = path.split("/", 1)[0]
    if family not in HOMES:
        raise FileNotFoundError(f"{path!r} names no family of shipped SQL files")
    return f"{HOMES[family]}/{path}"


@cache
def read(path: str) -> str:
    """Text of the SQL file named ``path`` (``family/file.sql``)."""
    resource = files("astral_taskclaim").joinpath(*package_path(path).split("/"))
    if not resource.is_file():
        raise FileNotFoundError(f"astral_taskclaim/{package_path(path)} is not a shipped SQL file")
    return resource.read_text(encoding="utf-8")


def all_paths() -> list[str]:
    """Every shipped SQL file, named ``family/file.sql`` as :func:`read` takes it."""
    found: list[str] = []

    def walk(node: Traversable, prefix: str) -> None:
        for child in node.iterdir():
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith(".sql"):
                found.append(prefix + child.name)

    root = files("astral_taskclaim")
    for family, home in HOMES.items():
        walk(root.joinpath(*home.split("/"), family), f"{family}/")
    return sorted(found)


def with_roles(path: str, *, service_role: str) -> sql.Composed:
    """The grants file at ``path`` with ``{service_role}`` as a quoted identifier."""
    return sql.SQL(read(path)).format(service_role=sql.Identifier(service_role))  # type: ignore[arg-type]
