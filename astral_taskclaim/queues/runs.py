"""The run history of claimed tasks: what a settled message says of its run.

A worker's consumer notes on each message of a ``@claimed_task`` it runs a
:class:`RunRecord` (``ReceivedMessage.run``: task, key, run id, status,
attempt, times, the failure); the queue writes the records with the
settlement, into ``taskclaim.run`` (``runs/record.sql``):

- the PostgreSQL queue in its settle statement itself (its
  ``records_runs`` is true), so the history costs no round trip;
- every other queue through :func:`write_runs`, one statement per batch,
  which the worker runs right after ``settle()``.

Text from a message (a task name it gives) or an exception is made storable
first (:func:`~astral_taskclaim.core.logtext.storable`), and a batch whose
statement fails anyway is written run by run: one run the history cannot
hold costs no other its record.

How much a task records is its :data:`HistoryMode`: ``"all"`` (the
default), ``"failures"`` (failed attempts, give-ups, and the success that
ends a run which failed before) or ``"none"``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any, Literal, cast

from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, DataError

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.envelope import Envelope
from astral_taskclaim.core.logtext import printable, storable
from astral_taskclaim.db import statements
from astral_taskclaim.db.connections import savepoint_if_in_atomic

__all__ = [
    "HistoryMode",
    "RunNote",
    "RunRecord",
    "failure",
    "queue_history",
    "settle_recording",
    "write_runs",
]

#: How much of a task's runs the history keeps.
HistoryMode = Literal["all", "failures", "none"]
_HISTORY_MODES: tuple[HistoryMode, ...] = ("all", "failures", "none")

RunStatus = Literal["RETRYING", "SUCCESSFUL", "FAILED"]

#: Longest traceback and exception message kept per failed attempt.
_MAX_TRACEBACK_CHARS = 100_000
MAX_MESSAGE_CHARS = 2_000

logger = logging.getLogger(__name__)

_DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode


@dataclass(slots=True, kw_only=True)
class RunRecord:
    """One settled attempt of a claimed task's run, as the history keeps it.

    ``started`` and ``ended`` are epoch seconds; ``error`` is the failure
    (:func:`failure`) as JSON text; ``payload`` the task's JSON, kept for a
    run that failed (so it can be enqueued again).
    """

    run_id: str
    task: str
    queue: str
    key: str
    status: RunStatus
    attempts: int
    started: float
    ended: float
    error: str | None = None
    payload: str | None = None


def history_problem(value: object) -> str | None:
    """Why ``value`` is no :data:`HistoryMode`, or ``None``."""
    if isinstance(value, str) and value in _HISTORY_MODES:
        return None
    return f"must be one of {', '.join(map(repr, _HISTORY_MODES))}, got {value!r}"


def queue_history(alias: str) -> HistoryMode:
    """``TASKCLAIM_QUEUES[alias]["HISTORY"]``: what the history keeps of
    the runs of the queue's tasks that set nothing themselves (``"all"``
    when unset); ``ImproperlyConfigured`` for another value."""
    config = app_settings.QUEUES.get(alias)
    value = config.get("HISTORY", "all") if isinstance(config, dict) else "all"
    problem = history_problem(value)
    if problem is not None:
        raise ImproperlyConfigured(f"TASKCLAIM_QUEUES[{alias!r}]['HISTORY'] {problem}")
    return cast(HistoryMode, value)


@cache
def worker_id() -> str:
    """This process's worker id in ``worker_ids``: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def failure(
    error: BaseException | None,
    *,
    attempt: int,
    at: float,
    final: bool,
    message: str | None = None,
) -> str:
    """One failed attempt as the history's ``errors`` hold it, as JSON text:
    the exception's class path, message and traceback (``error``; or only
    ``message`` when there is no exception), the attempt, when and whether
    the run gave up there. Text is cut to :data:`_MAX_TRACEBACK_CHARS` and
    :data:`MAX_MESSAGE_CHARS`, and made storable (no NUL, no lone
    surrogate), so one odd exception cannot fail a batch's settlement."""
    entry: dict[str, Any] = {
        "exception_class_path": None,
        "message": message or "",
        "traceback": "",
        "attempt": attempt,
        "at": datetime.fromtimestamp(at, UTC).isoformat(),
        "final": final,
    }
    if error is not None:
        kind = type(error)
        entry["exception_class_path"] = f"{kind.__module__}.{kind.__qualname__}"
        try:
            entry["message"] = str(error)
            entry["traceback"] = "".join(traceback.format_exception(error))
        except BaseException:  # an exception whose __str__ raises, even SystemExit
            entry["message"] = f"<{kind.__qualname__}: message not printable>"
    entry["message"] = _cut(storable(entry["message"]), MAX_MESSAGE_CHARS)
    entry["traceback"] = _cut(storable(entry["traceback"]), _MAX_TRACEBACK_CHARS)
    text: str = _DUMPS(entry)
    return text


def _payload_json(task: Any) -> str | None:
    """``task`` (decoded from a message) as JSON text, or ``None`` if it has
    no JSON form (then the run cannot be enqueued again from the admin)."""
    try:
        text: str = _DUMPS(task)
    except (TypeError, ValueError):
        return None
    return text


_STATUS: dict[str, RunStatus] = {
    "ok": "SUCCESSFUL",
    "retried": "RETRYING",
    "failed": "FAILED",
    "unparseable": "FAILED",
}


@dataclass(frozen=True, slots=True)
class RunNote:
    """How a consumer notes the runs of task ``task`` on their messages:
    every run, or (``failures_only``) failed attempts and the runs they end."""

    task: str
    failures_only: bool = False

    def __post_init__(self) -> None:
        # A message names the task of an unknown one: anyone's text.
        object.__setattr__(self, "task", storable(self.task))

    def note(
        self,
        queue: str,
        found: Envelope,
        attempts: int,
        decision: Any,
        started: float,
    ) -> RunRecord | None:
        """The record of attempt ``attempts`` of ``found``'s run, which
        started at ``started`` and came to ``decision`` (its ``outcome``:
        ``ok``, ``retried``, ``failed`` or ``unparseable``; its
        ``exception``); ``None`` when the history does not keep it."""
        outcome, exception = decision.outcome, decision.exception
        if outcome == "ok" and self.failures_only and attempts <= 1:
            return None
        status = _STATUS[outcome]
        ended = time.time()
        error = payload = None
        if status != "SUCCESSFUL":
            final = status == "FAILED"
            shown = None if exception else "parse() returned None"
            error = failure(exception, attempt=attempts, at=ended, final=final, message=shown)
            payload = _payload_json(found.task) if final else None
        return RunRecord(
            run_id=found.claim,
            task=self.task,
            queue=queue,
            key=found.key,
            status=status,
            attempts=attempts,
            started=started,
            ended=ended,
            error=error,
            payload=payload,
        )


def _run_params(runs: Iterable[tuple[int | None, RunRecord]]) -> dict[str, Any]:
    """The ``runs`` and ``worker_id`` parameters of ``runs/record.sql`` (and
    of the PostgreSQL queue's settle statement) for ``(message id, record)``
    pairs: the records as one JSON text, encoded in one call."""
    rows = [
        {
            "message": message_id,
            "id": run.run_id,
            "task": run.task,
            "queue": run.queue,
            "key": run.key,
            "status": run.status,
            "attempts": run.attempts,
            "error": run.error,
            "payload": run.payload,
            "started": run.started,
            "ended": run.ended,
        }
        for message_id, run in runs
    ]
    return {"runs": _DUMPS(rows), "worker_id": worker_id()}


def write_runs(alias: str, messages: Sequence[Any], *, queue: str) -> int:
    """Writes the runs noted on the settled ``messages`` (their ``run``) of
    queue ``queue`` to database ``alias``; how many it wrote. Never raises:
    the messages are settled (see :func:`_record`)."""
    runs = [
        (None, message.run)
        for message in messages
        if message.run is not None and message.settlement is not None
    ]
    return _record(alias, runs, queue=queue) if runs else 0


def settle_recording(
    alias: str,
    path: str,
    params: Mapping[str, Any],
    runs: Sequence[tuple[int | None, RunRecord]],
    *,
    queue: str,
) -> statements.Rows:
    """The rows of settle statement ``path`` (which includes
    ``runs/record.sql``) run on ``alias`` with ``params`` and the
    parameters of ``runs``. When the history refuses a run (a data error),
    the statement runs again without them, so a batch always settles, and
    the runs are then written as :func:`_record` does."""
    try:
        with savepoint_if_in_atomic(alias):
            return statements.run(alias, path, {**params, **_run_params(runs)})
    except DataError:
        if not runs:
            raise
    rows = statements.run(alias, path, {**params, **_run_params(())})
    _record(alias, runs, queue=queue, together=False)
    return rows


def _record(
    alias: str,
    runs: Sequence[tuple[int | None, RunRecord]],
    *,
    queue: str,
    together: bool = True,
) -> int:
    """Writes ``runs`` in one statement (``together``) or, when that fails
    or not, one by one, so a run the history cannot hold costs no other its
    record; how many it wrote. Those lost are logged
    (``queue.runs_not_recorded``)."""
    if together and len(runs) > 1:
        try:
            with savepoint_if_in_atomic(alias):
                statements.run(alias, "runs/record.sql", _run_params(runs))
            return len(runs)
        except (DatabaseError, ValueError):
            pass
    written = 0
    for run in runs:
        try:
            with savepoint_if_in_atomic(alias):
                statements.run(alias, "runs/record.sql", _run_params([run]))
            written += 1
        except (DatabaseError, ValueError):
            _not_recorded(queue, 1)
    return written


def _not_recorded(queue: str, count: int) -> None:
    logger.warning(
        "%s: %d runs could not be recorded in the history; their messages are settled",
        *(printable(queue), count),
        exc_info=True,
        extra={"event": "queue.runs_not_recorded", "queue": queue},
    )


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
