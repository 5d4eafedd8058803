"""Internal: what the worker's loop (:mod:`.running`) needs of its
:class:`~astral_taskclaim.worker.loop.Worker` (the worker module imports
it), what it tells its ``on_run``, handing messages back at once, picking
a suspect, and stopping when a sync run is left running past its time limit.

A worker that dies (a task's ``os._exit()``, SIGKILL, out of memory) leaves
every message it had leased unsettled, and each comes back counted one more
delivery, run or not. The PostgreSQL queue says which messages came back so
(:attr:`~astral_taskclaim.queues.ReceivedMessage.unsettled_before`): such a
*suspect* may be what killed its worker. The loop runs a suspect alone,
nothing else of the queue in flight beside it, after handing the rest of
its batch back unrun (their delivery not counted; other suspects stay
suspects, each to run alone in turn), so a task that kills its worker uses
up its own attempts, never its batch-mates'.
"""

from __future__ import annotations

import logging
import threading
from contextlib import AbstractContextManager
from typing import Any, Protocol

from astral_taskclaim.consumer.summary import ConsumeSummary, Outcome, TaskRun, WorkerStats
from astral_taskclaim.consumer.time_limits import time_limits_scope
from astral_taskclaim.core.logtext import printable
from astral_taskclaim.queues import MessageBatch, ReceivedMessage
from astral_taskclaim.worker.leases import LeaseKeeper
from astral_taskclaim.worker.shutdown import TwoStageStop

logger = logging.getLogger(__name__)

#: Largest batch the default batch size grows to with the concurrency.
_MAX_DEFAULT_BATCH = 100


def default_batch_size(concurrency: int) -> int:
    """Ten messages a thread, from 10 to :data:`_MAX_DEFAULT_BATCH`: a
    receive and a settlement spread over enough messages to cost little."""
    return min(max(10, 10 * concurrency), _MAX_DEFAULT_BATCH)


def message_key(message: ReceivedMessage) -> str | None:
    """The key a message's body names, if it names one."""
    body = message.body
    key = body.get("key") if isinstance(body, dict) else None
    return key if isinstance(key, str) else None


def task_run(queue: str, message: ReceivedMessage, outcome: Outcome, seconds: float) -> TaskRun:
    """What ``on_run`` is told about one message."""
    return TaskRun(queue, message_key(message), message.attempts, outcome, seconds)


class Worker(Protocol):
    """What of :class:`~astral_taskclaim.worker.loop.Worker` the loop uses."""

    queue: str
    concurrency: int
    using: str | None
    stats: WorkerStats
    stats_lock: threading.Lock
    stopper: TwoStageStop
    recoverable: tuple[type[Exception], ...]
    on_run: Any

    @property
    def task(self) -> Any: ...

    def stop(self) -> None: ...

    def _receive(self) -> MessageBatch | None: ...

    def _recover(self, error: BaseException, *, interruptible: bool) -> None: ...

    def _lease_keeper(
        self, messages: list[ReceivedMessage]
    ) -> AbstractContextManager[LeaseKeeper | None]: ...

    def _settle(self, messages: list[ReceivedMessage]) -> None: ...

    def _finish_batch(
        self, batch: MessageBatch, summary: ConsumeSummary, unsettled: list[ReceivedMessage]
    ) -> None: ...


def suspect_of(messages: list[ReceivedMessage]) -> ReceivedMessage | None:
    """The suspect of ``messages`` to run next: the most delivered (the
    first of equals), or ``None`` when none is one."""
    suspects = [m for m in messages if m.unsettled_before]
    return max(suspects, key=lambda m: m.attempts) if suspects else None


def hand_back_now(worker: Worker, queue: str, messages: list[ReceivedMessage]) -> None:
    """Hands ``messages`` (received, none started, none kept by a lease
    keeper any more) back unrun and settles them at once, counted as
    returned."""
    if not messages:
        return
    for message in messages:
        message.hand_back()
    summary = ConsumeSummary(queue=queue, returned=len(messages))
    worker._finish_batch(MessageBatch(queue, messages), summary, messages)


def stopping_on_hang(worker: Worker) -> AbstractContextManager[None]:
    """Inside the block, a sync run of the process left running past its
    time limit (a thread Python cannot stop) stops ``worker`` after its
    running messages, to exit for its supervisor to restart it, the thread
    ending with the process; counted in ``stats.hung`` by the worker of its
    queue, which logs ``worker.task_hung``."""

    def hung(queue: str, key: str, seconds: float) -> None:
        if queue == worker.queue:
            with worker.stats_lock:
                worker.stats.hung += 1
            logger.error(
                "%s: task %s is still running past its time limit of %g s on a thread that "
                "cannot be stopped; stopping after the running messages, to exit for a restart",
                *(printable(queue), printable(key), seconds),
                extra={"event": "worker.task_hung", "queue": queue, "key": key},
            )
        worker.stop()

    return time_limits_scope(hung)
