"""The app's packaged SQL files and their rendering.

A file is named ``family/file.sql``; :data:`_HOMES` maps each family to the
folder beside the code that runs it. Files are read with
:mod:`importlib.resources` (wheels, zips). Role names go in only as quoted
identifiers, values as query parameters.

A line ``-- include: family/file.sql`` stands for that file's statement,
changed by the ``--   replacing: X`` / ``--   with: Y`` pairs after it
(first occurrence each); includes nest. :func:`read` expands a file once, so
a prepared statement's text is the same on every call.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable

from psycopg import sql

#: Family of SQL files -> the folder (in the package) holding its folder.
_HOMES = {
    "taskclaim": "db/sql",
    "slug": "db/sql",
    "testing": "db/sql",
    "queue": "queues/postgres/sql",
    "tasks": "tasks_backend/sql",
    "admin": "admin/sql",
    "outbox": "queues/sql",
    "runs": "queues/sql",
    "schedule": "schedules/sql",
}


def _package_path(path: str) -> str:
    """Where the SQL file named ``family/file.sql`` lives inside the
    package, e.g. ``queues/postgres/sql/queue/send.sql``."""
    family = path.split("/", 1)[0]
    if family not in _HOMES:
        raise FileNotFoundError(f"{path!r} names no family of shipped SQL files")
    return f"{_HOMES[family]}/{path}"


_INCLUDE = re.compile(r"(?P<indent>[ \t]*)-- include: (?P<path>\S+)[ \t]*")
_REPLACING = re.compile(r"[ \t]*--   replacing: (?P<text>.*\S)[ \t]*")
_WITH = re.compile(r"[ \t]*--   with: (?P<text>.*\S)[ \t]*")


def source(path: str) -> str:
    """The SQL file named ``path`` (``family/file.sql``) as written, its
    includes not yet expanded."""
    resource = files("astral_taskclaim").joinpath(*_package_path(path).split("/"))
    if not resource.is_file():
        raise FileNotFoundError(f"astral_taskclaim/{_package_path(path)} is not a shipped SQL file")
    return resource.read_text(encoding="utf-8")


@cache
def read(path: str) -> str:
    """Text of the SQL file named ``path`` (``family/file.sql``), its
    includes expanded: what is sent to the server."""
    return _expand(source(path), where=path)


def _expand(text: str, *, where: str) -> str:
    """``text`` with each ``-- include:`` marker replaced by the statement
    it names, changed as the ``replacing:``/``with:`` lines after it say.
    ``where`` names ``text`` in errors."""
    lines = text.split("\n")
    out: list[str] = []
    at = 0
    while at < len(lines):
        include = _INCLUDE.fullmatch(lines[at])
        at += 1
        if include is None:
            out.append(lines[at - 1])
            continue
        statement = _statement(read(include["path"]))
        while at + 1 < len(lines):
            old, new = _REPLACING.fullmatch(lines[at]), _WITH.fullmatch(lines[at + 1])
            if old is None or new is None:
                break
            statement = _replace(
                statement, old["text"], new["text"], f"{where} including {include['path']}"
            )
            at += 2
        out.extend(include["indent"] + line if line else line for line in statement.split("\n"))
    return "\n".join(out)


def _statement(text: str) -> str:
    """``text`` without its leading comment and blank lines or trailing space."""
    lines = text.rstrip().split("\n")
    while lines and (not lines[0].strip() or lines[0].lstrip().startswith("--")):
        lines.pop(0)
    return "\n".join(lines)


def _replace(statement: str, old: str, new: str, where: str) -> str:
    # Exactly once: a text found twice, or no more, would change the
    # statement in a way its reader cannot see from the include.
    found = statement.count(old)
    if found != 1:
        raise ValueError(
            f"{where}: {old!r} occurs {found} times in the included statement, not once"
        )
    return statement.replace(old, new)


def _all_paths() -> list[str]:
    """Every shipped SQL file, named ``family/file.sql`` as :func:`read` takes it."""
    found: list[str] = []

    def walk(node: Traversable, prefix: str) -> None:
        for child in node.iterdir():
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith(".sql"):
                found.append(prefix + child.name)

    root = files("astral_taskclaim")
    for family, home in _HOMES.items():
        walk(root.joinpath(*home.split("/"), family), f"{family}/")
    return sorted(found)


def with_roles(path: str, *, service_role: str) -> sql.Composed:
    """The grants file at ``path`` with ``{service_role}`` as a quoted identifier."""
    return sql.SQL(read(path)).format(service_role=sql.Identifier(service_role))  # type: ignore[arg-type]
