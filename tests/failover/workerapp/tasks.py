"""The failover tests' tasks. Each run appends one JSON line ``{"kind",
"seq"}`` to ``runs-<pid>.jsonl`` in the directory ``TASKCLAIM_FAILOVER_RUNS``
names: outside the database, so what a failover does to the database cannot
touch the record of what ran. One line is one ``write`` on a file opened
for appending, so the threads of a ``--concurrency`` worker never interleave
their lines."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from astral_taskclaim.tasks import claimed_task
from astral_taskclaim.tasks_backend.compat import FRAMEWORK

__all__ = ["JOBS", "job", "noted", "record"]

#: The queue alias of the claimed task.
JOBS = "jobs"
_lock = threading.Lock()

if FRAMEWORK == "django.tasks":
    from django.tasks import task
else:
    from django_tasks import task  # type: ignore[no-redef]


def record(kind: str, seq: int) -> None:
    """Appends this run to the process's run file."""
    path = Path(os.environ["TASKCLAIM_FAILOVER_RUNS"]) / f"runs-{os.getpid()}.jsonl"
    line = json.dumps({"kind": kind, "seq": seq}) + "\n"
    with _lock, path.open("a", encoding="utf-8") as stream:
        stream.write(line)


@claimed_task(queue=JOBS, name="tests.failover.jobs", max_retries=5)
def job(body: dict[str, Any]) -> None:
    """A claimed enqueue's run (sync and async producers alike)."""
    record(body["kind"], body["seq"])


@task()
def noted(seq: int) -> int:
    """A Django Task's run; its result is ``seq``."""
    record("task", seq)
    return seq
