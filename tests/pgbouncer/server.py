"""PgBouncer in transaction mode on 127.0.0.1, in front of a PostgreSQL
server, for the tests that run through it (``tests/pgbouncer``).

:class:`PgBouncer` writes a configuration into a directory of its own,
starts ``pgbouncer`` in the foreground and stops it by its process id. Any
client user name is accepted (``auth_type = any``, loopback only) and every
database is relayed to the server as the user and password given, so the
test database Django creates is reachable through it. The admin console
(database ``pgbouncer``) answers :meth:`PgBouncer.admin`.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import threading
from collections import deque
from pathlib import Path
from typing import Any

import psycopg

__all__ = ["DEFAULT_PORT", "PgBouncer"]

#: The port the suite's PgBouncer listens on.
DEFAULT_PORT = 16432

CONFIG = """\
[databases]
* = {target}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 500
ignore_startup_parameters = extra_float_digits,options
log_connections = 0
log_disconnections = 0
admin_users = pgbouncer
"""


class PgBouncer:
    """One ``pgbouncer`` process relaying to ``host``:``port`` as ``user``."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        user: str,
        password: str = "",
        listen_port: int = DEFAULT_PORT,
        pool_size: int = 10,
    ) -> None:
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.listen_port = listen_port
        self.pool_size = pool_size
        self.process: subprocess.Popen[str] | None = None
        self.log: deque[str] = deque(maxlen=200)
        self._directory: Path | None = None

    def __repr__(self) -> str:
        return f"<PgBouncer 127.0.0.1:{self.listen_port} -> {self.host}:{self.port}>"

    def start(self) -> None:
        """Starts ``pgbouncer`` and returns once it listens."""
        binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        self._directory = Path(tempfile.mkdtemp(prefix="taskclaim-pgbouncer-"))
        config = self._directory / "pgbouncer.ini"
        target = f"host={self.host} port={self.port} user={self.user}"
        if self.password:
            target += f" password={self.password}"
        config.write_text(
            CONFIG.format(target=target, port=self.listen_port, pool_size=self.pool_size)
        )
        command = [binary, str(config)]
        if os.geteuid() == 0:  # pgbouncer refuses to run as root
            command[1:1] = ["-u", _unprivileged_user()]
            self._directory.chmod(0o755)
            config.chmod(0o644)
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        listening = threading.Event()
        threading.Thread(target=self._drain, args=(listening,), daemon=True).start()
        if not listening.wait(30):
            self.stop()
            raise RuntimeError(f"pgbouncer did not start: {list(self.log)}")

    def _drain(self, listening: threading.Event) -> None:
        assert self.process is not None
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line.rstrip())
            if "process up" in line:
                listening.set()
        listening.set()  # exited: start() reports the log

    def stop(self) -> None:
        """Stops the process (by its id) and removes its directory."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)

    def admin(self, command: str) -> list[tuple[Any, ...]]:
        """Runs ``command`` on the admin console (e.g. ``SHOW POOLS``)."""
        with psycopg.connect(
            host="127.0.0.1",
            port=self.listen_port,
            dbname="pgbouncer",
            user="pgbouncer",
            autocommit=True,
            cursor_factory=psycopg.ClientCursor,  # the console takes simple queries only
        ) as connection:
            cursor = connection.execute(command)
            return cursor.fetchall() if cursor.description else []

    def close_server_connections(self, database: str) -> None:
        """Closes PgBouncer's connections to ``database``, so it can be dropped."""
        self.admin(f"KILL {database}")
        self.admin(f"RESUME {database}")


def _unprivileged_user() -> str:
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name).pw_name
        except KeyError:
            continue
    raise RuntimeError("pgbouncer needs a non-root user to run as (postgres or nobody)")
