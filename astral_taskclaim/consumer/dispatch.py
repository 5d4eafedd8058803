"""Several claimed tasks on one queue: which task a message is for.

A queue that carries more than one ``@claimed_task`` has each task's
messages name it in :data:`~astral_taskclaim.core.envelope.TASK_FIELD`
(``"taskName"``), a field after the four of the TypeScript package's body,
which its consumer ignores. A message that names no task (from a TypeScript
producer) goes to the queue's default task (``@claimed_task(default=True)``).

- :func:`naming_task` is the sending side: a view of a queue backend whose
  claimed-task bodies carry the task's name.
- The consuming side is the queue's one
  :class:`~astral_taskclaim.consumer.consume.Consumer`, which holds its
  tasks by name and runs each message with the task it names.

A message naming a task this process does not know (a producer deployed
before its consumers), or naming none on a queue without a default, waits
for a worker that has it without using up its attempts, then is given up
(:func:`~astral_taskclaim.consumer.deferral.wait_for_task`).
"""

from __future__ import annotations

import copy
import functools
from dataclasses import replace
from typing import Any, Protocol

from django.core.exceptions import ImproperlyConfigured

from astral_taskclaim.consumer.summary import MessageConsumer
from astral_taskclaim.core.envelope import TASK_FIELD
from astral_taskclaim.queues import BaseQueue
from astral_taskclaim.queues.base import ClaimedInsert, encoding_writer


class QueueConsumer(Protocol):
    """What a worker consumes a queue with: a claimed task, a queue's
    several (a ``Consumer``), or a Django Tasks backend's runner; each
    gives the queue's one :class:`~astral_taskclaim.consumer.consume.Consumer`."""

    @property
    def name(self) -> str: ...

    @property
    def window_seconds(self) -> float | None:
        """The window of a message enqueued by hand that gives none."""

    def consumer(self, *, using: str | None = None) -> MessageConsumer: ...


def shared_with_runner(queue: str, runner: QueueConsumer, task: str) -> ImproperlyConfigured:
    """The error of a claimed task ``task`` declared on the queue a runner has to itself."""
    return ImproperlyConfigured(
        f"queue {queue!r}: {runner.name} cannot share its queue, and {task} is on it too; "
        "give each its own queue"
    )


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
