"""A throwaway Redis server for row 12's Celery broker.

``redis-server`` from the system's packages (Debian: ``redis-server``),
started on a free 127.0.0.1 port with persistence off (``--save ''
--appendonly no``: a broker for one benchmark run keeps nothing) in a
temporary directory, and stopped by its PID.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

BINARY = "redis-server"


def available() -> bool:
    """Whether ``redis-server`` is on ``PATH``."""
    return shutil.which(BINARY) is not None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextmanager
def running(*, timeout: float = 20.0) -> Iterator[str]:
    """Starts a Redis server; yields its ``redis://`` URL; stops it."""
    binary = shutil.which(BINARY)
    if binary is None:
        raise FileNotFoundError(f"{BINARY} is not installed (Debian: apt-get install redis-server)")
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="taskclaim-bench-redis-") as directory:
        args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        args += ["--appendonly", "no", "--dir", directory, "--loglevel", "warning"]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + timeout
            while not _answers(port):
                if proc.poll() is not None:
                    raise RuntimeError(f"{BINARY} exited with {proc.returncode}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{BINARY} did not answer within {timeout:g} s")
                time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
