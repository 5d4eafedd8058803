"""The claimed task of the reliability tests' worker processes.

Every run inserts a row into ``reliability_run`` (the test creates the
table) and, in the same statement, NOTIFYs ``reliability_run`` with the
worker's process id, so the test sees each run the moment it commits and
knows which process to kill. A task body is ``{"id": int, "mode": ...,
"sleep_ms": int}``: mode ``ok`` succeeds, ``fail_first`` fails its first
run, ``fail_always`` always fails; ``sleep_ms`` keeps the run busy after
recording it, so a kill can land inside the run too. The poison modes
(:data:`POISON_MODES`) end the run as a misbehaving task does: ``exit``
calls ``sys.exit(3)``, ``interrupt`` raises ``KeyboardInterrupt``,
``os_exit`` ends the worker process with ``os._exit(137)``; ``hang_first``
never returns from its first run (a sync task a time limit gives up on) and
succeeds on the next. With
``TASKCLAIM_RELIABILITY_ASYNC`` set, the task is an ``async def`` one.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection

from astral_taskclaim.tasks import claimed_task

RUNS_TABLE = "reliability_run"
CHANNEL = "reliability_run"
MODES = ("ok", "fail_first", "fail_always")
POISON_MODES = ("exit", "interrupt", "os_exit")
#: The exit status of a worker an ``os_exit`` task ends.
KILLED_STATUS = 137


class PlannedFailure(Exception):
    """The failure a ``fail_first`` or ``fail_always`` task was told to raise."""


def _record(task: dict[str, Any]) -> bool:
    """Records this run; whether it is to fail (or, ``hang_first``, to hang)."""
    mode = task.get("mode", "ok")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM reliability_run WHERE task_id = %s", [task["id"]])
        row = cursor.fetchone()
        earlier = int(row[0]) if row else 0
        fail = (
            mode in POISON_MODES
            or mode == "fail_always"
            or (mode in ("fail_first", "hang_first") and earlier == 0)
        )
        cursor.execute(
            """WITH run AS (
                 INSERT INTO reliability_run (task_id, outcome, pid)
                 VALUES (%s, %s, %s) RETURNING pid
               )
               SELECT pg_notify(%s, pid::text) FROM run""",
            [task["id"], "fail" if fail else "ok", os.getpid(), CHANNEL],
        )
    return fail


def _end(task: dict[str, Any], fail: bool) -> None:
    """Ends the run as its mode says."""
    mode = task.get("mode", "ok")
    if mode == "exit":
        sys.exit(3)
    if mode == "interrupt":
        raise KeyboardInterrupt
    if mode == "os_exit":
        os._exit(KILLED_STATUS)
    if mode == "hang_first" and fail:
        threading.Event().wait()  # for ever: only the process's end stops it
    if fail:
        raise PlannedFailure(f"task {task['id']} ({mode}) fails as planned")


def reliability_task(task: dict[str, Any]) -> None:
    """Records this run, then fails or not as the task's mode says."""
    fail = _record(task)
    if task.get("sleep_ms"):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(%s)", [task["sleep_ms"] / 1000])
    _end(task, fail)


async def async_reliability_task(task: dict[str, Any]) -> None:
    """:func:`reliability_task` as an ``async def`` task: it sleeps on the
    event loop, where a kill can land while it holds no thread."""
    fail = await sync_to_async(_record)(task)
    if task.get("sleep_ms"):
        await asyncio.sleep(task["sleep_ms"] / 1000)
    _end(task, fail)


def trailing_doc_task(task: dict[str, Any]) -> None:
    """The trailing-runs test's task: records the version of its document it
    read at its start (and the claim's token and end), keeps busy ``sleep_ms``, then
    records its end."""
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO trailing_run (key, version_seen, token, claim_ends, pid)
               SELECT d.key, d.version, c.token, c.expires_at, pg_backend_pid()
               FROM trailing_doc d LEFT JOIN taskclaim.claim c USING (key) WHERE d.key = %s
               RETURNING id""",
            [task["key"]],
        )
        [(run,)] = cursor.fetchall()
        if task.get("sleep_ms"):
            cursor.execute("SELECT pg_sleep(%s)", [task["sleep_ms"] / 1000])
        cursor.execute(
            "UPDATE trailing_run SET finished_at = clock_timestamp() WHERE id = %s", [run]
        )


def limited_task(task: dict[str, Any]) -> None:
    """The concurrency-limit test's task: records its start, keeps busy
    ``sleep_ms`` (on its first run only, with ``sleep_first``), then
    records its end, in ``limited_run``."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO limited_run (task_id, pid) VALUES (%s, %s) RETURNING id",
            [task["id"], os.getpid()],
        )
        [(run,)] = cursor.fetchall()
        cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, str(os.getpid())])
        cursor.execute("SELECT count(*) FROM limited_run WHERE task_id = %s", [task["id"]])
        [(runs,)] = cursor.fetchall()
    # Busy outside the database: a killed worker leaves no session sleeping.
    if task.get("sleep_ms") and (runs == 1 or not task.get("sleep_first")):
        time.sleep(task["sleep_ms"] / 1000)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE limited_run SET finished_at = clock_timestamp() WHERE id = %s", [run]
        )


if os.environ.get("TASKCLAIM_RELIABILITY_LIMITED"):
    claimed_task(queue="reliability", max_retries=3, concurrency_limit=2)(limited_task)
elif os.environ.get("TASKCLAIM_RELIABILITY_TRAILING"):
    claimed_task(queue="reliability", max_retries=3, window_seconds=1)(trailing_doc_task)
else:
    claimed_task(
        queue="reliability",
        max_retries=int(os.environ.get("TASKCLAIM_RELIABILITY_MAX_RETRIES", "3")),
        name="tests.reliability.workerapp.tasks.reliability_task",
    )(async_reliability_task if os.environ.get("TASKCLAIM_RELIABILITY_ASYNC") else reliability_task)


if os.environ.get("TASKCLAIM_RELIABILITY_SCHEDULES"):
    # The schedules test's target: its slots are counted on the queue, not run.
    @claimed_task(queue="periodic", max_retries=0, window_seconds=1)
    def periodic_task(task: dict[str, Any]) -> None:
        """Never consumed: the test reads the slots' messages."""
