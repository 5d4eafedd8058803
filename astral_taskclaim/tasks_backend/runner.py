"""Running Django Tasks from a queue: the consumer task of each queue a
``ClaimTaskBackend`` sends to.

A :class:`TaskRunner` is registered like any ``@claimed_task``, under the
queue's alias, so ``manage.py consume_claimed QUEUE`` and
:class:`~astral_taskclaim.worker.loop.Worker` run Django Tasks with the same
retries, two-stage shutdown and reconnects. Each message goes through
``Consumer.consume_one`` (which decides ack, retry or give-up and writes the
claim); the runner records the attempt and its outcome in
``taskclaim.task_result`` around it:

- before running, the run is marked ``RUNNING`` with one more worker id; a
  run already finished (or cancelled) is acked without running again;
- a run whose ``runAfter`` is still ahead (a delay longer than the queue
  takes in one send) is sent again for the rest of the wait and acked;
- afterwards: ``SUCCESSFUL`` with the return value, ``READY`` again with
  the error when a retry is due, ``FAILED`` with it on the last attempt.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from astral_taskclaim.consumer.consume import (
    Consumer,
    ConsumeSummary,
    Message,
    MessageConsumer,
    Outcome,
    TaskOptions,
)
from astral_taskclaim.core.envelope import parse_body
from astral_taskclaim.core.validation import max_retries_problem
from astral_taskclaim.queues import queues
from astral_taskclaim.tasks import ClaimedTask, requested_retry_after_ms
from astral_taskclaim.tasks_backend import results
from astral_taskclaim.tasks_backend.compat import (
    TaskContext,
    TaskResultStatus,
    normalize_json,
    set_return_value,
    task_finished,
    task_started,
)

logger = logging.getLogger(__name__)


def _not_called(task: Any) -> None:
    raise RuntimeError("a TaskRunner runs messages through consume(), not by being called")


class TaskRunner(ClaimedTask[Any]):
    """The consumer task of queue ``queue`` for Django Tasks of the backend
    ``backend_alias``; ``max_retries`` unless a task sets its own."""

    #: Its messages name no claimed task: the queue is the runner's alone.
    shareable = False

    def __init__(self, *, backend_alias: str, queue: str, max_retries: int) -> None:
        super().__init__(
            _not_called,
            queue=queue,
            max_retries=max_retries,
            parse=None,
            retry_after_ms=None,
            name=f"Django Tasks of backend {backend_alias!r}",
            window_seconds=None,
        )
        self.backend_alias = backend_alias

    def consumer(self, *, using: str | None = None) -> _RunnerConsumer:
        """Runs the messages one by one (see the module docstring)."""
        refuse = TaskOptions(_refuse, _not_called, 0)
        return _RunnerConsumer(self, Consumer.create(refuse, using=using))

    def _send_again_later(self, queue: str, message: Message, run_after: datetime) -> bool:
        """Sends the message again for the wait left, when more than a
        second is; whether it did (the message is then acked)."""
        wait = (run_after - timezone.now()).total_seconds()
        if wait <= 1:
            return False
        sender = queues[queue]
        sender.send(message.body, delay_seconds=min(wait, sender.max_send_delay_seconds))
        message.ack()
        logger.info(
            "%s: run %s is due at %s; sent again",
            *(queue, message.body.get("claim"), run_after.isoformat()),
            extra={"event": "tasks.run_deferred", "queue": queue},
        )
        return True


@dataclass(frozen=True)
class _RunnerConsumer(MessageConsumer):
    """A :class:`TaskRunner`'s consumer: ``refuse`` acks what is no Django
    Task's message as malformed or unparseable."""

    runner: TaskRunner
    refuse: Consumer

    def consume_one(self, message: Message, summary: ConsumeSummary) -> Outcome:
        queue, refuse = summary.queue, self.refuse
        found = parse_body(message.body)
        payload = found.task if found is not None else None
        if found is None or not _is_payload(payload):
            return refuse.consume_one(message, summary)
        assert isinstance(payload, Mapping)
        run_after = _run_after(payload)
        if run_after is not None and self.runner._send_again_later(queue, message, run_after):
            return "ok"
        try:
            task = results.load_task(payload["taskPath"])
        except LookupError as error:
            results.fail(refuse.alias, found.claim, results.error_of(error), final=True)
            return refuse.consume_one(message, summary)
        # The run's own retry count, else the backend's (a bad one too).
        max_retries = payload.get("maxRetries", getattr(task, "max_retries", None))
        if max_retries is None or max_retries_problem(max_retries) is not None:
            max_retries = self.runner.max_retries
        attempt = _Attempt(task, found.claim, refuse.alias, payload)
        options = TaskOptions(_accept, attempt.run, max_retries, requested_retry_after_ms)
        outcome = refuse.for_task(options).consume_one(message, summary)
        attempt.record(outcome)
        return outcome


@dataclass
class _Attempt:
    """One attempt of a run: starts it, runs it, records what happened."""

    task: Any
    result_id: str
    database: str
    payload: Mapping[str, Any]
    skipped: bool = False
    return_value: Any = None
    error: BaseException | None = None
    started: tuple[Any, ...] | None = field(default=None, repr=False)

    def run(self, payload: Any) -> object:
        self.started = results.start(self.database, self.result_id)
        if self.started is None:
            self.skipped = True
            return None
        result = self._task_result(TaskResultStatus.RUNNING)
        task_started.send(type(self.task.get_backend()), task_result=result)
        args, kwargs = list(payload["args"]), dict(payload["kwargs"])
        try:
            if self.task.takes_context:
                value = self.task.func(TaskContext(task_result=result), *args, **kwargs)
            else:
                value = self.task.func(*args, **kwargs)
        except Exception as error:
            self.error = error
            raise
        if inspect.isawaitable(value):
            return self._finish(value)
        self._keep(value)
        return None

    async def _finish(self, awaitable: Awaitable[Any]) -> None:
        try:
            self._keep(await awaitable)
        except Exception as error:
            self.error = error
            raise

    def _keep(self, value: Any) -> None:
        try:
            self.return_value = normalize_json(value)
        except (TypeError, ValueError) as error:
            self.error = error
            raise

    def record(self, outcome: Outcome) -> None:
        """Writes the attempt's outcome as ``consume_one`` decided it."""
        if self.skipped or self.started is None:
            return
        if outcome == "ok":
            finished = results.succeed(self.database, self.result_id, self.return_value)
            status = TaskResultStatus.SUCCESSFUL
        elif self.error is not None:
            final = outcome == "failed"
            error = results.error_of(self.error)
            finished = results.fail(self.database, self.result_id, error, final=final)
            if not final:
                return
            status = TaskResultStatus.FAILED
        else:
            return
        result = self._task_result(status, finished_at=finished)
        if status == TaskResultStatus.SUCCESSFUL:
            set_return_value(result, self.return_value)
        task_finished.send(type(self.task.get_backend()), task_result=result)

    def _task_result(self, status: Any, *, finished_at: datetime | None = None) -> Any:
        assert self.started is not None
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
    value = payload.get("runAfter")
    return parse_datetime(value) if isinstance(value, str) else None


def _accept(task: Any) -> Any:
    return task


def _refuse(task: Any) -> None:
    return None
