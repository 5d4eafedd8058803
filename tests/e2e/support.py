"""Helpers of the end-to-end tests that run ``manage.py`` subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from django.db import connection

DEADLINE = 60.0


def wait_for(condition: Callable[[], object], what: str, timeout: float = DEADLINE) -> None:
    """Polls ``condition`` until it is true; fails naming ``what`` after ``timeout``."""
    ends = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > ends:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def json_lines(path: Path) -> list[Any]:
    """The JSON lines a running (or killed) process wrote to ``path`` so
    far: only complete lines count, as the last one may still be being
    written (a long record takes more than one write) or was cut off by a
    SIGKILL."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8", errors="replace")
    complete = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in complete.splitlines() if line.strip()]


def database_url(application_name: str) -> str:
    """The test database's URL, for the worker's ``DATABASE_URL``."""
    settings = connection.settings_dict
    query = {k: str(v) for k, v in settings["OPTIONS"].items() if isinstance(v, str | int)}
    query["application_name"] = application_name
    user = quote(settings["USER"] or "", safe="")
    password = f":{quote(settings['PASSWORD'], safe='')}" if settings["PASSWORD"] else ""
    host = settings["HOST"] or ""
    if host.startswith("/"):
        query["host"], host = host, ""
    ports = str(settings["PORT"] or "")
    if "," in host:  # several nodes (a failover cluster): host:port,host:port
        netloc = ",".join(
            f"{h}:{p}" for h, p in zip(host.split(","), ports.split(","), strict=True)
        )
    else:
        netloc = f"{host}:{ports}" if ports else host
    return f"postgres://{user}{password}@{netloc}/{settings['NAME']}?{urlencode(query)}"


def build_wheel(out: Path) -> Path:
    """The wheel of this tree, built into ``out``."""
    root = Path(__file__).resolve().parents[2]
    command = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "-w",
        str(out),
        str(root),
    ]
    subprocess.run(command, check=True, capture_output=True)
    (built,) = out.glob("astral_taskclaim-*.whl")
    return built
