"""Internal: a worker's run with ``concurrency`` 1, one message at a time.

:class:`OneAtATime` is the loop of a :class:`~astral_taskclaim.worker.loop.Worker`
whose ``concurrency`` is 1 (:mod:`~astral_taskclaim.worker.side_by_side` is
the loop of the others). It receives a batch, runs its messages in order
through the task consumer's ``consume_one`` while the batch's leases are
kept, hands back the messages a stop left unrun, and settles the batch
once; ``close_old_connections()`` after each batch, as Django does after a
request.
"""

from __future__ import annotations

import time

from django.db import close_old_connections

from astral_taskclaim.consumer.summary import ConsumeSummary
from astral_taskclaim.queues import MessageBatch, ReceivedMessage
from astral_taskclaim.worker.leases import LeaseKeeper
from astral_taskclaim.worker.side_by_side import Worker, task_run

__all__ = ["OneAtATime"]


class OneAtATime:
    """Runs ``worker`` one message at a time until it stops, is drained
    (``burst``) or has received ``max_messages``."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def run(self) -> None:
        """Receives and runs batches until the worker stops."""
        worker = self.worker
        while not worker.stopper.requested:
            batch = worker._receive()
            if batch is None:
                break
            self._process(batch)
            close_old_connections()

    def _process(self, batch: MessageBatch) -> None:
        """Runs the batch's messages until done or stopped; settles it once."""
        worker = self.worker
        worker.stats.batches += 1
        worker.stats.received += len(batch.messages)
        # Fewest deliveries first (stable): a message brought back by its own
        # crashes runs after the rest, so a worker it kills again has run
        # them, and they do not pile up deliveries unrun behind it.
        batch.messages.sort(key=_deliveries)
        summary = ConsumeSummary(queue=batch.queue)
        with worker._lease_keeper(batch.messages) as keeper:
            done = self._run(batch, summary, keeper)
        returned = [m for m in batch.messages[done:] if keeper is None or not keeper.lost(m)]
        for message in returned:
            message.hand_back()
        summary.returned = len(returned)
        worker._finish_batch(batch, summary, batch.messages)

    def _run(self, batch: MessageBatch, summary: ConsumeSummary, keeper: LeaseKeeper | None) -> int:
        """Runs the batch's messages in order until done or stopped; how
        many it went through (a message lost to another delivery is
        skipped: its new consumer runs it)."""
        worker = self.worker
        on_run, stopper = worker.on_run, worker.stopper
        done = 0
        try:
            # Made per batch: asks whether the claims connection is usable.
            consumer = worker.task.consumer(using=worker.using)
            for done, message in enumerate(batch.messages):
                if stopper.requested:
                    return done
                if keeper is not None and keeper.lost(message):
                    worker.stats.leases_lost += 1
                    continue
                if on_run is None:
                    consumer.consume_one(message, summary)
                    continue
                started = time.monotonic()
                outcome = consumer.consume_one(message, summary)
                on_run(task_run(batch.queue, message, outcome, time.monotonic() - started))
        except worker.recoverable as error:
            # The claims database is unreachable: leave this message and the
            # rest to the retry of the messages not run.
            worker._recover(error, interruptible=False)
            return done
        return len(batch.messages)


def _deliveries(message: ReceivedMessage) -> int:
    return message.attempts
