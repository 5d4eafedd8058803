"""What one ``enqueue()`` sends: :class:`RunRequest`, the sender that
records a run before its message leaves for a queue outside the database,
and the enqueue of a task with ``trailing`` (:func:`enqueue_trailing_run`)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from astral_taskclaim.claims.trailing import Enqueued, enqueue_trailing
from astral_taskclaim.claims.writing import plan
from astral_taskclaim.core.envelope import PLACEHOLDER_TOKEN, encode_json, message_body
from astral_taskclaim.core.jsontext import not_json_place
from astral_taskclaim.core.validation import Debounce, Trailing
from astral_taskclaim.db import statements
from astral_taskclaim.queues import BaseQueue
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks_backend.compat import normalize_json
from astral_taskclaim.tasks_backend.results import compact_json

logger = logging.getLogger(__name__)

#: Tries of the one-statement enqueue when a racing claim of the key ends
#: between its check and its insert (the holder is then read again).
ENQUEUE_TRIES = 3
#: The claim window of a run that does not coalesce (its key is unique, so
#: its claim only has to exist while ``enqueue_claimed`` sends).
_UNCOALESCED_WINDOW = 1.0


def json_value(where: str, value: Any) -> Any:
    """``value`` normalised as Django does (``normalize_json``); ``TypeError``
    naming ``where`` and the place inside it (:func:`not_json_place`) for
    what is no JSON: a type JSON lacks (a ``Decimal`` too), or NaN or an
    infinity, which neither JSON nor ``jsonb`` holds."""
    try:
        normalized = normalize_json(value)
        compact_json(normalized)  # as its jsonb column will hold it
    except (TypeError, ValueError) as error:
        raise TypeError(
            not_json_place(value, where, error, loose=True) or f"{where}: {error}"
        ) from error
    return normalized


def json_arguments(
    task: Any, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """``args`` and ``kwargs`` as :func:`json_value`s; ``TypeError`` naming
    the task and the first argument that is no JSON."""
    try:
        return (
            [json_value(f"args[{i}]", value) for i, value in enumerate(args)],
            {name: json_value(f"kwargs[{name!r}]", value) for name, value in kwargs.items()},
        )
    except TypeError as error:
        raise TypeError(f"{task.module_path}: arguments must be JSON: {error}") from error


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

    def claim_window(self) -> float:
        """Seconds the claim of a run sent through ``enqueue_claimed`` lasts:
        the coalescing window (or :data:`_UNCOALESCED_WINDOW`) after its delay."""
        return (self.window or _UNCOALESCED_WINDOW) + self.delay_seconds()

    def in_database_params(self, queue: PostgresQueue) -> dict[str, Any]:
        """A fresh token for the run, and the parameters of
        ``tasks/enqueue.sql`` (claim, message and result row) with it."""
        self.token = str(uuid.uuid4())
        body = message_body(self.envelope_key, self.token, self.window, self.payload)
        return {
            **self.row_params(),
            "seconds": float(self.window + self.delay_seconds()),
            "message_queue": queue.queue_name,
            "body": queue.encode(body).decode("utf-8"),
        }

    def changing_hands(self, key: str) -> transaction.TransactionManagementError:
        """The error when ``key``'s claim kept ending and starting again
        between the enqueue's tries."""
        return transaction.TransactionManagementError(
            f"{self.task.module_path}: key {key!r} kept changing hands; try again"
        )

    def row_params(self) -> dict[str, Any]:
        """Parameters of the result row (``tasks/record.sql`` and ``enqueue.sql``)."""
        return {
            "token": self.token,
            "task_path": self.task.module_path,
            "backend": self.backend,
            "task_queue_name": self.task.queue_name,
            "queue": self.queue,
            # Django takes any whole number (True, 5.0); the column is a smallint.
            "priority": int(self.task.priority),
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

    @property
    def max_send_delay_seconds(self) -> float:
        """The queue's longest delay of one send."""
        return float(self.queue.max_send_delay_seconds)

    @property
    def task_name(self) -> str:
        """The Django Task's path (on the enqueue's span)."""
        return str(self.request.task.module_path)

    def run_statement(self, path: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Runs a shipped SQL file on the results database (Django's connection)."""
        return statements.run(self.database, path, params)

    def send(self, body: dict[str, Any], *, delay_seconds: float = 0) -> None:
        """Records the run, then sends ``body`` to the queue (after
        ``delay_seconds``, or the run's delay if longer)."""
        delay = self.recorded(body, self.run_statement(*self.record_statement(body)))
        delay = max(delay, min(delay_seconds, self.queue.max_send_delay_seconds))
        try:
            self.queue.send(body, delay_seconds=delay)
        except Exception:
            try:
                self.run_statement(*self.forget_statement(body))
            except Exception:
                self.log_forget_failure(body)
            raise

    def record_statement(self, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The statement recording the run of ``body`` (under its claim token)."""
        self.request.token = body["claim"]
        return "tasks/record.sql", self.request.row_params()

    def recorded(self, body: dict[str, Any], rows: list[tuple[Any, ...]]) -> float:
        """Notes the recorded row's enqueue time; the send's delay (a run
        further out is delivered early and sent again until due)."""
        self.enqueued_at = rows[0][0]
        return min(self.request.delay_seconds(), self.queue.max_send_delay_seconds)

    def forget_statement(self, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The statement deleting the row of ``body``'s run after a failed send."""
        return "tasks/forget.sql", {"token": body["claim"]}

    def log_forget_failure(self, body: dict[str, Any]) -> None:
        """Logs (in the ``except`` block) that deleting the row failed too."""
        logger.error(
            "run %s: send failed, then deleting its result row failed",
            body["claim"],
            exc_info=True,
            extra={"event": "tasks.result_forget_failed", "queue": self.queue.alias},
        )


def enqueue_trailing_run(
    queue: BaseQueue, database: str, request: RunRequest, mode: Trailing | Debounce
) -> tuple[Enqueued, datetime | None]:
    """The enqueue of a run whose task has ``trailing``, as
    ``enqueue_claimed(trailing=...)`` makes it: the token of the run that
    carries the trigger (its result id) and the new run's enqueue time. A
    new run (sent now, or the key's new follow-up) has its result row
    written with its message (in one transaction on a queue in the
    database, else before the send); a trigger merging into a pending
    follow-up gives that run's row its task and arguments in the merge's
    statement (``tasks/merge.sql``), in ``"latest"`` mode this trigger's."""
    key, window, payload = request.envelope_key, request.claim_window(), request.payload
    placeholder = message_body(key, PLACEHOLDER_TOKEN, window, payload)
    function = f"{request.task.module_path}.enqueue"
    how = plan(queue, database, function=function, placeholders=[placeholder])
    sender = RecordingSender(queue, database, request)
    enqueued = enqueue_trailing(
        sender,
        key,
        payload,
        encode_json(payload, name="task"),
        window_seconds=window,
        trailing=mode,
        alias=database,
        joins=how.joins,
        merge_path="tasks/merge.sql",
    )
    return enqueued, sender.enqueued_at
