"""Several claimed tasks on one queue: which task a message is for.

A queue that carries more than one ``@claimed_task`` has each task's
messages name it in :data:`~astral_taskclaim.core.envelope.TASK_FIELD`
(``"taskName"``), a field after the four of the TypeScript package's body,
which its consumer ignores. A message that names no task (from a TypeScript
producer) goes to the queue's default task (``@claimed_task(default=True)``).

- :func:`naming_task` is the sending side: a view of a queue backend whose
  claimed-task bodies carry the task's name.
- :class:`QueueTasks` is the consuming side: the tasks of one queue, whose
  ``_TaskDispatch`` consumer hands each message to its task's consumer,
  so every message goes through the one per-message core
  (``Consumer.consume_one``).

A message naming a task this process does not know (a producer deployed
before its consumers), or naming none on a queue without a default, waits
for a worker that has it without using up its attempts, then is given up
(:class:`~astral_taskclaim.consumer.deferral.UnknownTask`).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from astral_taskclaim.consumer.consume import Consumer
from astral_taskclaim.consumer.deferral import UnknownTask
from astral_taskclaim.consumer.event_loop import run_steps
from astral_taskclaim.consumer.summary import (
    ConsumeSummary,
    Message,
    MessageConsumer,
    Outcome,
    Steps,
    TaskOptions,
)
from astral_taskclaim.core.envelope import TASK_FIELD, task_name_of
from astral_taskclaim.queues import BaseQueue
from astral_taskclaim.queues.base import ClaimedInsert, encoding_writer
from astral_taskclaim.queues.runs import RunNote, queue_history

__all__ = ["QueueConsumer", "QueueTasks", "nameable", "naming_task"]


def nameable(name: object) -> bool:
    """Whether a claimed task can be named ``name``: a non-empty ``str``
    without NUL (which no run history could store)."""
    return isinstance(name, str) and name != "" and "\x00" not in name


class QueueConsumer(Protocol):
    """What a worker consumes a queue with: a claimed task, a queue's
    several (:class:`QueueTasks`), or a Django Tasks backend's runner."""

    @property
    def name(self) -> str: ...

    @property
    def window_seconds(self) -> float | None:
        """The window of a message enqueued by hand that gives none."""

    def consumer(self, *, using: str | None = None) -> MessageConsumer: ...


class _Task(QueueConsumer, Protocol):
    @property
    def default(self) -> bool: ...

    def task_consumer(self, *, using: str | None = None) -> MessageConsumer: ...


def naming_task(queue: BaseQueue, name: str) -> BaseQueue:
    """``queue`` as a view (sharing its connections) whose claimed-task
    bodies name task ``name``; made once per instance and name."""
    views = queue.__dict__.setdefault("_task_views", {})
    view: BaseQueue | None = views.get(name)
    if view is None:
        view = copy.copy(queue)
        view.__class__ = _naming_class(type(queue))
        view.__dict__["task_name"] = name
        views[name] = view
    return view


@functools.cache
def _naming_class(cls: type[BaseQueue]) -> type[BaseQueue]:
    def encode(self: BaseQueue, body: Any) -> bytes:
        if type(body) is dict and "claim" in body:
            body = {**body, TASK_FIELD: self.__dict__["task_name"]}
        return cls.encode(self, body)

    def claimed_insert(self: BaseQueue, alias: str) -> ClaimedInsert | None:
        # The one-statement bodies go through encode too, as every other's.
        insert = cls.claimed_insert(self, alias)
        if insert is None:
            return None
        return replace(insert, writer=functools.partial(encoding_writer, self))

    attributes = {
        "encode": encode,
        "claimed_insert": claimed_insert,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
    }
    return type(cls.__name__, (cls,), attributes)


class QueueTasks:
    """The claimed tasks of queue ``queue``; the one task of a queue of one
    is its default (its messages name no task)."""

    def __init__(self, queue: str, tasks: Sequence[_Task]) -> None:
        self.queue = queue
        self.tasks = {task.name: task for task in tasks}
        defaults = [task for task in tasks if task.default or len(tasks) == 1]
        self.default = defaults[0] if defaults else None
        self.name = ", ".join(self.tasks)

    def __repr__(self) -> str:
        return f"<QueueTasks {self.queue!r}: {self.name}>"

    @property
    def window_seconds(self) -> float | None:
        """The default task's window, if there is a default."""
        return None if self.default is None else self.default.window_seconds

    def knows(self, named: object) -> bool:
        """Whether a message naming task ``named`` (``None``: none) has its task here."""
        wanted = self.default.name if named is None and self.default is not None else named
        return isinstance(wanted, str) and wanted in self.tasks

    def consumer(self, *, using: str | None = None) -> _TaskDispatch:
        """Runs each message with its task's consumer; made once per batch."""
        consumers = {name: task.task_consumer(using=using) for name, task in self.tasks.items()}
        default = None if self.default is None else self.default.name
        return _TaskDispatch(self, consumers, default, using=using)


class _TaskDispatch(MessageConsumer):
    """Hands each message to the consumer of the task it names."""

    __slots__ = ("consumers", "default", "tasks", "using")

    def __init__(
        self,
        tasks: QueueTasks,
        consumers: dict[str, MessageConsumer],
        default: str | None,
        *,
        using: str | None,
    ) -> None:
        self.tasks = tasks
        self.consumers = consumers
        self.default = default
        self.using = using

    def consume_one(self, message: Message, summary: ConsumeSummary) -> Outcome:
        return run_steps(self.steps(message, summary))

    def steps(self, message: Message, summary: ConsumeSummary) -> Steps:
        named = task_name_of(message.body)
        wanted = self.default if named is None else named
        consumer = self.consumers.get(wanted) if isinstance(wanted, str) else None
        if consumer is None:
            consumer = self._unknown(named)
        return (yield from consumer.steps(message, summary))

    def _unknown(self, named: object) -> MessageConsumer:
        what = "names no task and it has no default" if named is None else f"has no task {named!r}"
        error = LookupError(f"queue {self.tasks.queue!r} {what} (its tasks: {self.tasks.name})")
        # A give-up is recorded as a run of the task it names, so it is seen.
        mode = queue_history(self.tasks.queue)
        task = named if isinstance(named, str) else ""
        note = None if mode == "none" else RunNote(task, failures_only=mode == "failures")
        consumer = Consumer.create(_NO_TASK, using=self.using, history=note)
        return UnknownTask(error, consumer, nameable=named is None or nameable(named))


#: The options of the consumer an unknown task's message starts with.
_NO_TASK = TaskOptions(bool, bool, 0)
