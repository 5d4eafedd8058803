"""Internal: a worker's run with ``concurrency`` 1, one message at a time.

:class:`OneAtATime` is the loop of a :class:`~astral_taskclaim.worker.loop.Worker`
whose ``concurrency`` is 1 (:mod:`~astral_taskclaim.worker.side_by_side` is
the loop of the others). It receives a batch, runs its messages in order
through the task consumer's ``consume_one`` while the batch's leases are
kept, hands back the messages a stop left unrun, and settles the batch
once; ``close_old_connections()`` after each batch, as Django does after a
request. A message whose last delivery ran out unsettled (its worker died)
runs alone: the rest of its batch is handed back first.
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import close_old_connections

from astral_taskclaim.consumer.summary import ConsumeSummary
from astral_taskclaim.core.logtext import printable
from astral_taskclaim.db.connections import close_connections
from astral_taskclaim.queues import MessageBatch, ReceivedMessage
from astral_taskclaim.worker.lanes import POLL_SECONDS
from astral_taskclaim.worker.leases import LeaseKeeper
from astral_taskclaim.worker.protocol import Worker, hand_back_now, suspect_of, task_run

logger = logging.getLogger(__name__)


class OneAtATime:
    """Runs ``worker`` one message at a time until it stops, is drained
    (``burst``) or has received ``max_messages``."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        # The running part and the index of its first message not started,
        # from which a stop hands back at once on the watcher's thread
        # (taken: whether it did).
        self._lock = threading.Lock()
        self._part: list[ReceivedMessage] = []
        self._next = 0
        self._taken = False
        self._keeper: LeaseKeeper | None = None
        self._ended = threading.Event()

    def run(self) -> None:
        """Receives and runs batches until the worker stops."""
        worker = self.worker
        watcher = threading.Thread(target=self._watch, name=f"taskclaim-{worker.queue}-stop")
        watcher.start()
        try:
            while not worker.stopper.requested:
                batch = worker._receive()
                if batch is None:
                    break
                self._process(batch)
                close_old_connections()
        finally:
            self._ended.set()
            watcher.join()

    def _watch(self) -> None:
        """On the first stop signal, hands back at once the messages of the
        running part not started yet, while the running one finishes."""
        worker = self.worker
        while not worker.stopper.wait(POLL_SECONDS):
            if self._ended.is_set():
                return
        with self._lock:
            waiting, keeper, self._taken = self._part[self._next :], self._keeper, True
        back = [m for m in waiting if keeper is None or not keeper.lost(m)]
        if not back:
            return
        if keeper is not None:
            keeper.drop(waiting)  # no extension may follow their settlement
        try:
            hand_back_now(worker, worker.queue, back)
        finally:
            close_connections()  # this thread's
        logger.info(
            "%s: handed back %d messages not started",
            *(printable(worker.queue), len(back)),
            extra={"event": "worker.handed_back", "queue": worker.queue},
        )

    def _process(self, batch: MessageBatch) -> None:
        """Runs the batch's messages until done or stopped; settles them."""
        worker = self.worker
        worker.stats.batches += 1
        worker.stats.received += len(batch.messages)
        # Fewest deliveries first (stable): a message brought back by its own
        # crashes runs after the rest, so a worker it kills again has run
        # them, and they do not pile up deliveries unrun behind it.
        batch.messages.sort(key=_deliveries)
        suspect = suspect_of(batch.messages) if len(batch.messages) > 1 else None
        if suspect is not None:
            # A suspect runs alone, the rest of its batch handed back first
            # (see worker.protocol).
            hand_back_now(worker, batch.queue, [m for m in batch.messages if m is not suspect])
            batch = MessageBatch(batch.queue, [suspect])
        summary = ConsumeSummary(queue=batch.queue)
        messages = batch.messages
        with worker._lease_keeper(messages) as keeper:
            with self._lock:
                self._part, self._next, self._taken, self._keeper = messages, 0, False, keeper
            done = self._run(batch.queue, messages, summary, keeper)
            with self._lock:
                if self._taken:  # the watcher settled those from self._next on
                    messages, done = messages[: self._next], min(done, self._next)
                self._part, self._next, self._taken = [], 0, False
        returned = [m for m in messages[done:] if keeper is None or not keeper.lost(m)]
        for message in returned:
            message.hand_back()
        summary.returned = len(returned)
        worker._finish_batch(batch, summary, messages)

    def _run(
        self,
        queue: str,
        messages: list[ReceivedMessage],
        summary: ConsumeSummary,
        keeper: LeaseKeeper | None,
    ) -> int:
        """Runs ``messages`` in order until done or stopped; how many it
        went through (a message lost to another delivery is skipped: its
        new consumer runs it)."""
        worker = self.worker
        on_run, stopper = worker.on_run, worker.stopper
        done = 0
        try:
            # Made per batch: asks whether the claims connection is usable.
            consumer = worker.task.consumer(using=worker.using)
            for done, message in enumerate(messages):
                with self._lock:
                    if stopper.requested or self._taken:
                        return done
                    self._next = done + 1
                if keeper is not None and keeper.lost(message):
                    worker.stats.leases_lost += 1
                    continue
                started = time.monotonic()
                outcome = consumer.consume_one(message, summary)
                seconds = time.monotonic() - started
                if keeper is not None:
                    keeper.end_run(message)
                if on_run is not None:
                    on_run(task_run(queue, message, outcome, seconds))
        except worker.recoverable as error:
            # The claims database is unreachable: leave this message and the
            # rest to the retry of the messages not run.
            worker._recover(error, interruptible=False)
            return done
        return len(messages)


def _deliveries(message: ReceivedMessage) -> int:
    return message.attempts
