"""``e2e``'s claimed task. A task is ``{"id": n, "log": path}`` plus:

- ``"block": lock``: the first run waits for PostgreSQL advisory lock
  ``lock``, which the test holds, so the test can act while it runs;
- ``"fail_first": true``: the first run fails.

Every run appends ``{"id", "run", "at"}`` to the JSON lines file ``log``,
``at`` being the database clock, so the test compares it with the queue's
times.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.db import connection
from django.dispatch import receiver

from astral_taskclaim.signals import queue_sender, task_finished
from astral_taskclaim.tasks import claimed_task


def _runs(log: Path, id_: int) -> int:
    if not log.exists():
        return 0
    lines = log.read_text(encoding="utf-8").splitlines()
    return sum(1 for line in lines if json.loads(line)["id"] == id_)


@claimed_task(queue="e2e", max_retries=3)
def e2e_task(task: dict[str, Any]) -> None:
    log = Path(task["log"])
    run = _runs(log, task["id"]) + 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM clock_timestamp())::float8")
        at = cursor.fetchone()[0]
    with log.open("a", encoding="utf-8") as stream:
        stream.write(json.dumps({"id": task["id"], "run": run, "at": at}) + "\n")
    if run == 1 and "block" in task:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [task["block"]])
            cursor.execute("SELECT pg_advisory_unlock(%s)", [task["block"]])
    if run == 1 and task.get("fail_first"):
        raise RuntimeError(f"task {task['id']} fails its first run")


@receiver(task_finished, sender=queue_sender("e2e"))
def record_finished(sender: str, key: str, attempts: int, **kwargs: Any) -> None:
    """Appends ``{"sender", "key", "attempts"}`` to ``log`` + ``.signals``:
    the receiver the docs show, connected as they say."""
    with Path(kwargs["task"]["log"] + ".signals").open("a", encoding="utf-8") as stream:
        stream.write(json.dumps({"sender": sender, "key": key, "attempts": attempts}) + "\n")
