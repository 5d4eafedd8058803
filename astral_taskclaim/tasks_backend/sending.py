"""What one ``enqueue()`` sends: :class:`RunRequest`, and the sender that
records a run before its message leaves for a queue outside the database."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from .. import statements
from ..queues import BaseQueue
from .results import compact_json

logger = logging.getLogger(__name__)


@dataclass
class RunRequest:
    """One run to enqueue: the Task, its JSON arguments and where it goes."""

    task: Any
    args: list[Any]
    kwargs: dict[str, Any]
    backend: str
    queue: str
    key: str | None = None
    token: str = ""
    # The envelope's key when the task does not coalesce: unique to the run.
    run_key: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def window(self) -> float:
        """The coalescing window (0 when the task does not coalesce)."""
        return float(getattr(self.task, "window_seconds", None) or 0)

    @property
    def envelope_key(self) -> str:
        """The claim key its message carries."""
        return self.key if self.key is not None else f"{self.task.module_path}:{self.run_key}"

    @property
    def run_after(self) -> datetime | None:
        value: datetime | None = self.task.run_after
        return value

    def delay_seconds(self) -> float:
        """Seconds until ``run_after`` (0 without one, or once it passed)."""
        if self.run_after is None:
            return 0.0
        return max(0.0, (self.run_after - timezone.now()).total_seconds())

    @property
    def payload(self) -> dict[str, Any]:
        """The envelope's ``task``: what the worker runs."""
        payload: dict[str, Any] = {
            "taskPath": self.task.module_path,
            "args": self.args,
            "kwargs": self.kwargs,
        }
        if self.run_after is not None:
            payload["runAfter"] = self.run_after.isoformat()
        retries = getattr(self.task, "max_retries", None)
        if retries is not None:  # set by using(), so not known from the path
            payload["maxRetries"] = retries
        return payload

    def row_params(self) -> dict[str, Any]:
        """Parameters of the result row (``tasks/record.sql`` and ``enqueue.sql``)."""
        return {
            "token": self.token,
            "task_path": self.task.module_path,
            "backend": self.backend,
            "task_queue_name": self.task.queue_name,
            "queue": self.queue,
            "priority": self.task.priority,
            "run_after": self.run_after,
            "key": self.key,
            "args": compact_json(self.args),
            "kwargs": compact_json(self.kwargs),
        }


class RecordingSender:
    """A queue for ``enqueue_claimed`` that records the run's result row
    (under the claim token the body carries) before sending the body with
    the run's delay; a failed send deletes the row again. Everything else
    (checks, encoding, name) is the queue's."""

    def __init__(self, queue: BaseQueue, database: str, request: RunRequest) -> None:
        self.queue = queue
        self.database = database
        self.request = request
        self.enqueued_at: datetime | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)

    def send(self, body: dict[str, Any]) -> None:
        """Records the run, then sends ``body`` to the queue."""
        self.request.token = body["claim"]
        rows = statements.run(self.database, "tasks/record.sql", self.request.row_params())
        self.enqueued_at = rows[0][0]
        delay = min(self.request.delay_seconds(), self.queue.max_delay_seconds)
        try:
            self.queue.send(body, delay_seconds=delay)
        except Exception:
            try:
                statements.run(self.database, "tasks/forget.sql", {"token": body["claim"]})
            except Exception:
                logger.error(
                    "run %s: send failed, then deleting its result row failed",
                    body["claim"],
                    exc_info=True,
                    extra={"event": "tasks.result_forget_failed", "queue": self.queue.alias},
                )
            raise
