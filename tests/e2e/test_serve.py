"""``make serve`` (``example_project/serve.py``) on an embedded PostgreSQL of
its own: SIGTERM and Ctrl-C stop the server, even after a killed run left its
PID in ``.pgdata/.handle_pids.json``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from .support import wait_for

pytestmark = pytest.mark.slow

BASE_DIR = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(done.stdout)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_stops_its_embedded_server(tmp_path: Path, stop: signal.Signals) -> None:
    data = tmp_path / "pgdata"
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")
    }
    env.update(PYTHONFAULTHANDLER="1", TASKCLAIM_PGDATA=str(data))
    env["SERVE_ADDRESS"] = f"127.0.0.1:{free_port()}"
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        serve = subprocess.Popen(
            [sys.executable, "example_project/serve.py"],
            cwd=BASE_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for(lambda: "Log in at" in log.read_text(), "serve to start", timeout=120)
            # A run killed outright before this one left its PID behind.
            handles = data / ".handle_pids.json"
            handles.write_text(json.dumps([dead_pid(), *json.loads(handles.read_text())]))
            assert (data / "postmaster.pid").exists()
            serve.send_signal(stop)
            try:
                code = serve.wait(timeout=60)
            except subprocess.TimeoutExpired:
                serve.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
                serve.wait(10)
                raise AssertionError(log.read_text()) from None
            assert code == 0, log.read_text()
        finally:
            if serve.poll() is None:
                serve.kill()
    assert not (data / "postmaster.pid").exists(), log.read_text()
    assert json.loads((data / ".handle_pids.json").read_text()) == []


def test_runserver_noreload_stopped_with_sigterm_stops_its_embedded_server(tmp_path: Path) -> None:
    # No SIGTERM handler of its own: the embedded server's module installs one.
    data = tmp_path / "pgdata"
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")
    }
    env.update(TASKCLAIM_PGDATA=str(data))
    log = tmp_path / "runserver.log"
    command = ["manage.py", "runserver", "--noreload", f"127.0.0.1:{free_port()}"]
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, *command],
            cwd=BASE_DIR / "example_project",
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for(lambda: "Quit the server with" in log.read_text(), "runserver", timeout=120)
            assert (data / "postmaster.pid").exists()
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
        finally:
            if server.poll() is None:
                server.kill()
    assert not (data / "postmaster.pid").exists(), log.read_text()
    assert json.loads((data / ".handle_pids.json").read_text()) == []
