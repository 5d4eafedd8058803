"""Internal: a worker's run, its messages one at a time or side by side.

:class:`Loop` is the loop of a :class:`~astral_taskclaim.worker.loop.Worker`
at every ``concurrency`` N. It puts each message of a batch in a lane
(:class:`~astral_taskclaim.worker.lanes.Lanes`); two messages of one key
never run at once. With N = 1 the receiving thread runs each batch itself,
in order, fewest deliveries first, before it receives the next; with N > 1
it receives a batch whenever no more than N received messages wait to
start, so the N threads always have the next message at hand. Every message goes through the
task consumer's ``consume_one`` (as :data:`~astral_taskclaim.consumer.summary.Steps`);
``close_old_connections()`` runs before and after each message on a lane's
thread, after each batch with N = 1 (what Django does around a request: a
connection that failed, or is older than ``CONN_MAX_AGE``, is closed, and
one kept is health-checked on reuse when ``CONN_HEALTH_CHECKS`` is on).

An ``async def`` task is handed to the process's event loop and holds no
thread while it awaits: its lane goes on with other messages, and the rest
of the message (claim write, history) runs on a lane when the task ends.
So ``concurrency`` counts messages in flight, running or awaited, and
threads start only as sync work needs them.

Each batch keeps its leases (one :class:`~astral_taskclaim.worker.leases.LeaseKeeper`
while any of its messages is leased) and is settled once, by the thread
whose message ends it. Several batches may be under way at once.

A drained queue (``burst``) or ``max_messages`` ends the receiving, and
the messages received still run. The first stop request lets the running
messages finish; the messages not started go back to the queue at once (settled as retries without a
delay, their leases no longer extended), then each batch is settled as its
last running message ends. A database error hands its message back (with
N = 1 the rest of its batch too) and makes the receiving loop reconnect
with the worker's backoff.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import defaultdict
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from operator import attrgetter

from django.db import close_old_connections

from astral_taskclaim.consumer.event_loop import submit
from astral_taskclaim.consumer.summary import ConsumeSummary, MessageConsumer, Steps
from astral_taskclaim.core.logtext import printable
from astral_taskclaim.db.connections import close_connections
from astral_taskclaim.queues import MessageBatch, ReceivedMessage
from astral_taskclaim.worker.lanes import POLL_SECONDS, Lanes
from astral_taskclaim.worker.leases import LeaseKeeper
from astral_taskclaim.worker.protocol import (
    Worker,
    hand_back_now,
    message_key,
    suspect_of,
    task_run,
)

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class _Batch:
    batch: MessageBatch
    consumer: MessageConsumer
    keeper: LeaseKeeper | None
    keeping: AbstractContextManager[LeaseKeeper | None]
    summary: ConsumeSummary
    #: Messages not yet run, skipped or handed back.
    left: int
    #: Messages already settled (handed back at a stop), by ``id()``.
    settled: set[int] = field(default_factory=set)


@dataclass(eq=False, slots=True)
class _Item:
    batch: _Batch
    message: ReceivedMessage
    key: str | None
    #: Once started: its consumer's steps, the summary they add to, and when.
    steps: Steps | None = None
    summary: ConsumeSummary | None = None
    started: float = 0.0
    #: What the awaitable it waited for gave (or raised): sent in on resuming.
    result: object = None
    error: BaseException | None = None


class Loop:
    """Runs ``worker`` with its ``concurrency`` lanes until it stops."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self._lock = threading.Condition()
        self._open = 0
        #: A database error a lane met: the receiving loop reconnects.
        self._error: BaseException | None = None
        #: What a lane raised that no message may swallow (a bug, SystemExit):
        #: raised again by :meth:`run` once every batch is settled.
        self._fatal: BaseException | None = None
        self.lanes: Lanes[_Item] = Lanes(
            worker.concurrency, self._run_one, name=f"taskclaim-{worker.queue}"
        )
        self._here = worker.concurrency == 1
        self._ended = threading.Event()

    def run(self) -> None:
        """Receives and runs until stopped, drained or ``max_messages``."""
        worker = self.worker
        stopping = worker.stopper
        watcher = threading.Thread(target=self._watch, name=f"taskclaim-{worker.queue}-stop")
        if self._here:  # the receiving thread runs the messages: another hands back
            watcher.start()
        try:
            while not stopping.requested:
                if not self._here:
                    self.lanes.wait_for_room(worker.concurrency, lambda: stopping.requested)
                if stopping.requested:
                    break
                error, self._error = self._error, None
                if error is not None:
                    worker._recover(error, interruptible=True)
                    continue
                batch = worker._receive()
                if batch is None:
                    break
                # Fewest deliveries first (stable): a message brought back by
                # its own crashes runs after the rest.
                batch.messages.sort(key=attrgetter("attempts"))
                suspect = suspect_of(batch.messages)
                if suspect is None:
                    self._start(batch)
                else:
                    self._alone(batch, suspect)
                if self._here:
                    self.lanes.run_here()
                    close_old_connections()
        except BaseException:
            stopping.request()  # the loop failed: nothing more starts
            raise
        finally:
            self._drain()
            self._ended.set()
            if self._here:
                watcher.join()
        if self._fatal is not None:
            raise self._fatal

    def _watch(self) -> None:
        """On the first stop, hands back at once the messages not started,
        while the receiving thread ends the running one."""
        stopper = self.worker.stopper
        while not stopper.wait(POLL_SECONDS):
            if self._ended.is_set():
                return
        try:
            self._hand_back(self.lanes.take_unstarted())
        finally:
            close_connections()  # this thread's

    def _drain(self) -> None:
        """Waits for every batch to be settled; once a stop is requested,
        hands back the messages not started instead of running them."""
        while True:
            if self.worker.stopper.requested:
                self._hand_back(self.lanes.take_unstarted())
            if self._here:  # what a failure left in progress (resumed, handed back)
                self.lanes.run_here()
            with self._lock:
                if not self._open:
                    break
                self._lock.wait(POLL_SECONDS)
        self.lanes.close()

    def _alone(self, batch: MessageBatch, suspect: ReceivedMessage) -> None:
        """Runs ``suspect`` with nothing else in flight (:mod:`.protocol`):
        the rest of its batch goes back at once; so does the suspect while
        other batches run, to be received again once they are done."""
        worker = self.worker
        with self._lock:
            alone = [] if self._open else [suspect]
        with worker.stats_lock:
            worker.stats.batches += 1
            worker.stats.received += len(batch.messages)
        hand_back_now(worker, batch.queue, [m for m in batch.messages if m not in alone])
        self._wait_idle()
        if alone:
            self._start(MessageBatch(batch.queue, alone), counted=True)
            self._wait_idle()

    def _wait_idle(self) -> None:
        if self._here:
            self.lanes.run_here()
        with self._lock:
            while self._open and not self.worker.stopper.requested:
                self._lock.wait(POLL_SECONDS)

    def _start(self, batch: MessageBatch, *, counted: bool = False) -> None:
        worker = self.worker
        if not counted:
            with worker.stats_lock:
                worker.stats.batches += 1
                worker.stats.received += len(batch.messages)
        keeping = worker._lease_keeper(batch.messages)
        keeper = keeping.__enter__()
        summary = ConsumeSummary(queue=batch.queue)
        try:
            consumer = worker.task.consumer(using=worker.using)
        except worker.recoverable as error:
            self._error = error
            keeping.__exit__(None, None, None)
            hand_back_now(worker, batch.queue, batch.messages)
            return
        track = _Batch(batch, consumer, keeper, keeping, summary, left=len(batch.messages))
        with self._lock:
            self._open += 1
        for message in batch.messages:
            key = message_key(message)
            self.lanes.put(key, _Item(track, message, key))

    def _run_one(self, item: _Item) -> bool:
        """A message's next step, on a lane's thread: ``False`` while it
        waits for its ``async def`` task on the event loop."""
        if item.summary is not None:
            return self._go_on(item)
        track, message, worker = item.batch, item.message, self.worker
        summary = ConsumeSummary(queue=track.summary.queue)
        lost = track.keeper is not None and track.keeper.lost(message)
        # One lane: a database error hands back the rest of the batch too.
        if lost or worker.stopper.requested or (self._here and self._error is not None):
            try:
                if not lost:  # lost: its new delivery runs it
                    message.hand_back()
                    summary.returned = 1
            finally:
                self._done(track, summary, lost=lost, count=1)
            return True
        item.summary, item.started = summary, time.monotonic()
        return self._go_on(item)

    def _resume(self, item: _Item, result: object, error: BaseException | None) -> None:
        """Called on the event loop's thread when the task it awaited ended."""
        item.result, item.error = result, error
        self.lanes.resume(item.key, item)

    def _go_on(self, item: _Item) -> bool:
        """Runs the message's steps to their end, or to an awaitable, which
        goes to the event loop (``False``: :meth:`_resume` brings it back)."""
        worker, message, summary = self.worker, item.message, item.summary
        assert summary is not None
        done = True
        if not self._here:
            close_old_connections()
        try:
            if item.steps is None:
                item.steps = item.batch.consumer.steps(message, summary)
            steps = item.steps
            result, error, item.result, item.error = item.result, item.error, None, None
            try:
                awaitable = steps.send(result) if error is None else steps.throw(error)
            except StopIteration as stop:
                seconds = time.monotonic() - item.started
                if item.batch.keeper is not None:
                    item.batch.keeper.end_run(message)
                if worker.on_run is not None:
                    worker.on_run(task_run(item.batch.batch.queue, message, stop.value, seconds))
            else:
                submit(awaitable, functools.partial(self._resume, item))
                done = False
        except worker.recoverable as error:
            self._error = error
            close_connections()
            # Even when acked: what failed may be the run's own bookkeeping
            # after it (a Django Task's result write), which the delivery
            # again redoes.
            message.hand_back()
            summary.returned += 1
        except BaseException as error:
            self._fatal = error
            worker.stop()
            self._give_back(message, summary)
        finally:
            if not self._here:
                close_old_connections()
            if done:
                self._done(item.batch, summary, lost=False, count=1)
        return done

    @staticmethod
    def _give_back(message: ReceivedMessage, summary: ConsumeSummary) -> None:
        if message.settlement is None:
            message.retry(delay_seconds=0)
            summary.returned += 1

    def _hand_back(self, items: list[_Item]) -> None:
        """Hands back the messages not started, at once: delivered again without
        a delay, their delivery not counted as an attempt."""
        by_batch: dict[_Batch, list[ReceivedMessage]] = defaultdict(list)
        for item in items:
            by_batch[item.batch].append(item.message)
        for track, messages in by_batch.items():
            keeper = track.keeper
            back = [m for m in messages if keeper is None or not keeper.lost(m)]
            for message in back:
                message.hand_back()
            if keeper is not None:
                keeper.drop(messages)  # no extension may follow their settlement
            self.worker._settle(back)
            summary = ConsumeSummary(queue=track.summary.queue, returned=len(back))
            with self._lock:
                track.settled.update(id(message) for message in messages)
            self._done(track, summary, lost=False, count=len(messages))
        if items:
            logger.info(
                "%s: handed back %d messages not started",
                *(printable(self.worker.queue), len(items)),
                extra={"event": "worker.handed_back", "queue": self.worker.queue},
            )

    def _done(self, track: _Batch, summary: ConsumeSummary, *, lost: bool, count: int) -> None:
        worker = self.worker
        with self._lock:
            track.summary.merge(summary)
            track.left -= count
            last = track.left == 0
        if lost:
            with worker.stats_lock:
                worker.stats.leases_lost += 1
        if not last:
            return
        track.keeping.__exit__(None, None, None)
        rest = [m for m in track.batch.messages if id(m) not in track.settled]
        try:
            worker._finish_batch(track.batch, track.summary, rest)
        finally:
            with self._lock:
                self._open -= 1
                self._lock.notify_all()
