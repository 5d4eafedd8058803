"""Running Django Tasks from a queue: the consumer task of each queue a
``ClaimTaskBackend`` sends to.

The task registry holds a :class:`TaskRunner` for each such queue (set from
the settings by :func:`~astral_taskclaim.tasks_backend.register_runners`),
so ``manage.py consume_claimed QUEUE`` and
:class:`~astral_taskclaim.worker.loop.Worker` run Django Tasks with the same
retries, two-stage shutdown and reconnects as claimed tasks. The runner is
the one entry of its queue's ``Consumer``, which runs each message as a
claimed task's (deciding ack, retry or give-up and writing the claim); its
hooks record the attempt and its outcome in ``taskclaim.task_result``:
``prepare`` before the run, ``failed`` on a failure and ``record`` after:

- a run whose ``runAfter`` is still ahead (a delay longer than the queue
  takes in one send) is sent again for the rest of the wait and acked; a
  ``runAfter`` that is no time with a UTC offset is malformed;
- before running, the run is marked ``RUNNING`` with one more worker id,
  only if the message's task path and arguments are the stored run's: a
  message naming a real run's id with others is refused as malformed (and
  the row left alone); a run already finished (or cancelled) is acked
  without running again. Only then is the task looked up: among the Tasks
  this process made, else by importing the stored path; nothing a message
  alone names is imported;
- a task this worker cannot load (a rolling deploy) waits for a worker
  that has it, as a claimed task's message does
  (:func:`~astral_taskclaim.consumer.deferral.wait_for_task`): each try
  records ``TaskNotFound`` and leaves the run ``READY``, the last ``FAILED``;
- afterwards: ``SUCCESSFUL`` with the return value, ``READY`` again with
  the error when a retry is due, ``FAILED`` with it on the last attempt
  (written, and ``task_finished`` sent, inside the failure's handler).

Any other error while reading or dispatching one message refuses it as
malformed; database and queue errors go to the worker, which reconnects.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from django.db import DatabaseError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from astral_taskclaim.consumer.consume import Consumer
from astral_taskclaim.consumer.deferral import send_again, wait_for_task
from astral_taskclaim.consumer.failures import TaskNotFound, describe_error
from astral_taskclaim.consumer.retry import requested_retry_after_ms
from astral_taskclaim.consumer.summary import (
    ConsumeSummary,
    Message,
    Outcome,
    TaskOptions,
    accept_task,
)
from astral_taskclaim.core.envelope import Envelope
from astral_taskclaim.core.validation import max_retries_problem
from astral_taskclaim.queues import QueueError
from astral_taskclaim.tasks_backend import results
from astral_taskclaim.tasks_backend.compat import (
    TaskContext,
    TaskResultDoesNotExist,
    TaskResultStatus,
    set_return_value,
    task_finished,
    task_started,
)
from astral_taskclaim.tasks_backend.sending import json_value

logger = logging.getLogger(__name__)


class Superseded(Exception):
    """The error of a trailing run that a later run of its key superseded
    before it started (its message acked unrun)."""


class TaskRunner:
    """The consumer of queue ``queue`` for Django Tasks of the backend
    ``backend_alias``; ``max_retries`` unless a task sets its own, and its
    runs' ``time_limit`` (``None``: the queue's). It has its queue to
    itself: the messages name no claimed task."""

    #: ``consume_claimed --file`` enqueues no Django Task: no window.
    window_seconds = None

    def __init__(
        self,
        *,
        backend_alias: str,
        queue: str,
        max_retries: int,
        time_limit: float | None = None,
    ) -> None:
        self.backend_alias = backend_alias
        self.queue = queue
        self.max_retries = max_retries
        self.time_limit = time_limit
        self.name = f"Django Tasks of backend {backend_alias!r}"

    def __repr__(self) -> str:
        return f"<TaskRunner {self.backend_alias!r} on queue {self.queue!r}>"

    def consumer(self, *, using: str | None = None) -> Consumer:
        """Its queue's consumer: every message is this runner's (see the module docstring)."""
        return Consumer(self.queue, default=self).consumer(using=using)

    def superseded(self, database: str, found: Envelope) -> None:
        """The consumer's hook for a trailing run's message acked unrun (its
        follow-up gone, or a later claim holds its key): the run, if one of
        that key that never started, ends ``FAILED`` (:class:`Superseded`),
        so no one waits on it for ever; ``task_finished`` is sent."""
        error = Superseded(f"Superseded: a later run of key {found.key!r} carries its trigger")
        args = (database, found.claim, results.error_of(error))
        if results.fail(*args, final=True, superseded_key=found.key) is None:
            return  # none such: nothing to end (a forged message too)
        try:
            result = results.to_task_result(results.fetch(database, found.claim))
        except TaskResultDoesNotExist:  # its task is gone from this worker
            return
        task_finished.send(type(result.task.get_backend()), task_result=result)

    def prepare(
        self, consumer: Consumer, message: Message, found: Envelope, summary: ConsumeSummary
    ) -> TaskOptions | Outcome:
        """The consumer's hook before a run: the started attempt's options
        and hooks, or what became of a message that runs nothing now."""
        payload = found.task
        if not _is_payload(payload):
            return _REFUSE  # no Django Task's message: unparseable
        try:
            return self._prepare(consumer, message, found, payload, summary)
        except _INFRASTRUCTURE:
            raise
        except Exception as error:
            # Nothing one message holds may stop the worker: it is refused.
            return consumer.malformed(message, summary, describe_error(error)[:500])

    def _prepare(
        self,
        consumer: Consumer,
        message: Message,
        found: Envelope,
        payload: Mapping[str, Any],
        summary: ConsumeSummary,
    ) -> TaskOptions | Outcome:
        queue, database = summary.queue, consumer.alias
        run_after = _run_after(payload)
        wait = 0.0 if run_after is None else (run_after - timezone.now()).total_seconds()
        if wait > 1:
            send_again(queue, message, wait)
            logger.info(
                "%s: run %s is due at %s; sent again",
                *(queue, found.claim, run_after.isoformat() if run_after else None),
                extra={"event": "tasks.run_deferred", "queue": queue},
            )
            return "ok"
        # Checked against the stored run first: a message naming a real
        # run's id with another task or arguments starts nothing.
        started = results.start(database, found.claim, payload)
        if started is None:
            problem = results.refusal(database, found.claim, payload)
            if problem is not None:
                return consumer.malformed(message, summary, problem)
            message.ack()  # finished or cancelled: nothing to run again
            summary.ok += 1
            return "ok"
        try:
            # The path is the stored run's now, written by the app's code.
            task = results.load_task(payload["taskPath"])
        except TaskNotFound as error:
            # Waits for a worker that has it (newer workers may), each try
            # recorded on the run.
            def record(error: BaseException, final: bool) -> None:
                results.fail(database, found.claim, results.error_of(error), final=final)

            hold = functools.partial(consumer.write_claim, queue, found, summary, False)
            return wait_for_task(
                message, found, summary, error, scale=consumer.scale, hold=hold, on_failure=record
            )
        # The run's own retry count, else the backend's (a bad one too).
        max_retries = payload.get("maxRetries", getattr(task, "max_retries", None))
        if max_retries is None or max_retries_problem(max_retries) is not None:
            max_retries = self.max_retries
        attempt = _Attempt(task, found.claim, database, payload, started)
        return TaskOptions(
            accept_task,
            attempt.run,
            max_retries,
            requested_retry_after_ms,
            on_failure=attempt.failed,
            after=attempt.record,
            time_limit=self.time_limit,
        )


#: Errors of the database or the queue while dispatching a message: the
#: worker reconnects and the message is delivered again, never refused.
_INFRASTRUCTURE = (DatabaseError, psycopg.Error, QueueError)


@dataclass
class _Attempt:
    """One started attempt of a run: runs it, records what happened."""

    task: Any
    result_id: str
    database: str
    payload: Mapping[str, Any]
    started: tuple[Any, ...] = field(repr=False)
    return_value: Any = None

    def run(self, payload: Any) -> object:
        result = self._task_result(TaskResultStatus.RUNNING)
        task_started.send(type(self.task.get_backend()), task_result=result)
        args, kwargs = list(payload["args"]), dict(payload["kwargs"])
        if self.task.takes_context:
            value = self.task.func(TaskContext(task_result=result), *args, **kwargs)
        else:
            value = self.task.func(*args, **kwargs)
        if inspect.isawaitable(value):
            return self._finish(value)
        self.return_value = json_value("return value", value)
        return None

    async def _finish(self, awaitable: Awaitable[Any]) -> None:
        self.return_value = json_value("return value", await awaitable)

    def failed(self, error: BaseException, final: bool) -> None:
        """Records a failed attempt; ``task_finished`` for the last. Called
        inside the failure's handler, so receivers see ``sys.exc_info()``
        (Django's own ERROR line has the traceback)."""
        finished = results.fail(self.database, self.result_id, results.error_of(error), final=final)
        if final:
            result = self._task_result(TaskResultStatus.FAILED, finished_at=finished)
            task_finished.send(type(self.task.get_backend()), task_result=result)

    def record(self, outcome: Outcome) -> None:
        """Writes a successful attempt (failures are written by :meth:`failed`)."""
        if outcome != "ok":
            return
        finished = results.succeed(self.database, self.result_id, self.return_value)
        result = self._task_result(TaskResultStatus.SUCCESSFUL, finished_at=finished)
        set_return_value(result, self.return_value)
        task_finished.send(type(self.task.get_backend()), task_result=result)

    def _task_result(self, status: Any, *, finished_at: datetime | None = None) -> Any:
        _status, enqueued_at, started_at, last_attempted_at, worker_ids = self.started
        payload = (list(self.payload["args"]), dict(self.payload["kwargs"]))
        return results.run_result(
            self.task,
            self.result_id,
            status,
            payload,
            backend=self.task.backend,
            enqueued_at=enqueued_at,
            started_at=started_at,
            last_attempted_at=last_attempted_at,
            finished_at=finished_at,
            worker_ids=worker_ids,
        )


def _is_payload(value: object) -> bool:
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("taskPath"), str)
        and isinstance(value.get("args"), list)
        and isinstance(value.get("kwargs"), dict)
    )


def _run_after(payload: Mapping[str, Any]) -> datetime | None:
    """The run's ``runAfter``; ``ValueError`` for one that is no ISO 8601
    time with a UTC offset (a naive time, February 30th, hour 25)."""
    value = payload.get("runAfter")
    if value is None:
        return None
    shown = repr(value)[:100]
    try:
        parsed = parse_datetime(value) if isinstance(value, str) else None
    except ValueError as error:  # well formed, but no such time (February 30th)
        raise ValueError(f"runAfter {shown} is no time: {error}") from None
    if parsed is None:
        raise ValueError(f"runAfter {shown} is no ISO 8601 time")
    if timezone.is_naive(parsed):
        raise ValueError(f"runAfter {shown} has no UTC offset")
    return parsed


def _refuse(task: Any) -> None:
    return None


#: The options of a message that is no Django Task's: its task unparseable.
_REFUSE = TaskOptions(_refuse, _refuse, 0)
