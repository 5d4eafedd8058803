"""Helpers of the reliability tests: their size, the figures they report,
snapshots of the app's tables, log capture and the security tests' roles
(the fixtures built on them are in ``conftest.py``).

Sizes are small by default, so CI runs them on both database legs; with
``TASKCLAIM_STRESS=1`` (``make stress``) every test runs its large version.
Each test writes what it measured (attempts, kills, restarts, duplicates,
losses...) to ``tests/artifacts/reliability.json`` under its size and the
server's major version; ``docs/reliability.md`` quotes that file.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from psycopg import sql

from astral_taskclaim.db.connections import server_version
from astral_taskclaim.queues.base import BaseQueue
from astral_taskclaim.tasks import ClaimedTask, TaskRegistry
from astral_taskclaim.worker.loop import Worker
from tests.claimkit import raw_connection

STRESS = os.environ.get("TASKCLAIM_STRESS") == "1"
SIZE = "stress" if STRESS else "ci"
ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "tests" / "artifacts" / "reliability.json"
_figures_lock = threading.Lock()


def sized(ci: int, stress: int) -> int:
    """``ci`` normally, ``stress`` under ``TASKCLAIM_STRESS=1``."""
    return stress if STRESS else ci


def server_label() -> str:
    """``PostgreSQL 18`` and the like: the leg the figures belong to."""
    connection.ensure_connection()
    return f"PostgreSQL {server_version(connection) // 10000}"


def record_figures(section: str, **figures: Any) -> None:
    """Stores ``figures`` as ``[size][server][section]`` in the figures file
    (merged with what other tests wrote) and prints them for ``-s`` runs."""
    label = server_label()
    with _figures_lock:
        FIGURES.parent.mkdir(parents=True, exist_ok=True)
        try:
            data = json.loads(FIGURES.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        data.setdefault(SIZE, {}).setdefault(label, {})[section] = {
            **figures,
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        temporary = FIGURES.with_suffix(".tmp")
        temporary.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        temporary.replace(FIGURES)
    shown = ", ".join(f"{name} {value}" for name, value in figures.items())
    print(f"\nreliability [{SIZE}, {label}] {section}: {shown}")


def table_snapshot() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every claim row and every queue message row, in a stable order."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, token::text, expires_at FROM taskclaim.claim ORDER BY key")
        claims = cursor.fetchall()
        cursor.execute(
            """SELECT id, queue, body, attempts, visible_at, lease::text
               FROM taskclaim.message ORDER BY id"""
        )
        messages = cursor.fetchall()
    return claims, messages


class EventLog(logging.Handler):
    """Keeps every record of the ``astral_taskclaim`` loggers, from any
    thread, and lets a test wait for an event to be logged."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._changed = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self._changed:
            self.records.append(record)
            self._changed.notify_all()

    def events(self, name: str | None = None) -> list[logging.LogRecord]:
        """The records of event ``name`` (every record with an event: ``None``)."""
        with self._changed:
            return [
                record
                for record in self.records
                if hasattr(record, "event") and (name is None or record.event == name)
            ]

    def wait_for(self, name: str, count: int = 1, *, timeout: float = 60.0) -> None:
        """Blocks until ``count`` records of event ``name`` were logged."""
        with self._changed:
            done = self._changed.wait_for(lambda: len(self.events(name)) >= count, timeout)
        if not done:
            pytest.fail(f"event {name} was not logged {count} times within {timeout} s")


def wait_until(condition: Callable[[], object], what: str, *, timeout: float = 60.0) -> None:
    """Polls ``condition`` for states no event announces (a row count in
    another process's table); fails naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


# The roles, for the security tests.

ADMIN = "taskclaim_rel_admin"
SERVICE = "taskclaim_rel_service"
ALIAS = "taskclaim_service"
DB_PASSWORD = "db-" + secrets.token_hex(12)
AS_SERVICE = pytest.mark.django_db(transaction=True, databases=["default", ALIAS])


def execute(query: sql.Composed, params: list[Any] | None = None) -> None:
    """Runs ``query`` as the test's own (superuser) login, on its own connection."""
    with raw_connection() as admin:
        admin.execute(query, params)


#: Keys the fuzz tests hold claims of while bodies are fuzzed.
LIVE_KEYS = ["fuzz:1", "fuzz:'2'", "fuzz:%s"]
TOKEN = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def is_envelope(body: Any) -> bool:
    """The TypeScript package's envelope check, restated: a str key, a UUID
    claim, a finite number of window seconds from 0 (a bool is no number);
    and a claim that could have been written: a key of 1 to 1024 UTF-8 bytes
    without NUL, a window of at most 10**11 seconds."""
    if not isinstance(body, dict):
        return False
    key, claim, window = body.get("key"), body.get("claim"), body.get("windowSeconds")
    if not isinstance(key, str) or not isinstance(claim, str) or not TOKEN.fullmatch(claim):
        return False
    try:
        if not 1 <= len(key.encode("utf-8")) <= 1024 or "\x00" in key:
            return False
    except UnicodeEncodeError:
        return False
    if isinstance(window, bool) or not isinstance(window, int | float):
        return False
    try:
        return math.isfinite(float(window)) and 0 <= window <= 10**11
    except OverflowError:
        return False


def drain(queue: BaseQueue, run: Any, *, max_retries: int = 3) -> Any:
    task: ClaimedTask[Any] = TaskRegistry().task(
        queue="fuzz", name="fuzz", max_retries=max_retries, parse=lambda t: ("parsed", t)
    )(run)
    return Worker("fuzz", task=task, backend=queue, wait=0, burst=True).run()
