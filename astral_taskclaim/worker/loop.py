"""The worker loop behind ``manage.py consume_claimed``.

:class:`Worker` receives a batch, runs its messages one at a time through
the queue's claimed task (its consumer's ``consume_one``, the core of
``consume_claimed``), and settles the whole batch with one ``settle()``
call. It can be used without the command (in a thread, in tests)::

    worker = Worker("refresh", batch_size=10, burst=True)
    stats = worker.run()

The loop itself is :mod:`~astral_taskclaim.worker.running`; with
``concurrency=N``, N messages run side by side, two of one key never at
once. What follows holds for every concurrency.

Shutdown is two-stage (:mod:`~astral_taskclaim.worker.shutdown`). :meth:`Worker.stop`
(what the first SIGTERM or SIGINT calls) lets the running message finish, settles the batch and
returns; the batch's messages not yet run are retried at once, so another
worker gets them (their next delivery counts one more attempt). A second
signal exits the process at once (status 128 + signal): its leased messages
come back when their leases run out.

A batch's leases are extended while it runs, where the queue allows it
(:mod:`astral_taskclaim.worker.leases`), so tasks may run longer than the
queue's visibility timeout; elsewhere the lease must outlast a whole batch.

Database and queue errors (a restarted server, a network blip) do not stop
the worker: it closes its connections and tries again with exponential
backoff (0.5 s to 30 s), logging ``worker.database_error``. Nothing is
lost: a message whose settlement could not be written is delivered again
when its lease runs out. Each batch logs one line on
``astral_taskclaim.worker.loop`` with ``extra={"event": "worker.batch", ...}``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import FrameType

from django.db import connections
from django.db.transaction import TransactionManagementError

from astral_taskclaim.claims.writing import in_transaction
from astral_taskclaim.consumer.dispatch import QueueConsumer
from astral_taskclaim.consumer.event_loop import event_loop_scope
from astral_taskclaim.consumer.summary import ConsumeSummary, TaskRun, WorkerStats
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.logtext import printable
from astral_taskclaim.core.not_migrated import NotMigratedError
from astral_taskclaim.core.redaction import redact_configured, redacting_filter
from astral_taskclaim.core.validation import validate_count
from astral_taskclaim.db.connections import close_connections
from astral_taskclaim.queues import (
    BaseQueue,
    MessageBatch,
    QueueError,
    ReceivedMessage,
    create_queue,
)
from astral_taskclaim.queues.runs import write_runs
from astral_taskclaim.schedules import Scheduler
from astral_taskclaim.tasks import registry
from astral_taskclaim.worker.budget import MessageBudget
from astral_taskclaim.worker.leases import LeaseKeeper, lease_length
from astral_taskclaim.worker.protocol import default_batch_size, stopping_on_hang
from astral_taskclaim.worker.running import Loop
from astral_taskclaim.worker.shutdown import DATABASE_ERRORS, Backoff, TwoStageStop

__all__ = ["Worker"]

logger = logging.getLogger(__name__)
logger.addFilter(redacting_filter)

#: Errors after which the worker reconnects and tries again.
RECOVERABLE: tuple[type[Exception], ...] = (*DATABASE_ERRORS, QueueError)
FIRST_BACKOFF = 0.5
MAX_BACKOFF = 30.0
#: Pause after an empty receive that did not wait (``wait=0``): no spinning.
IDLE_PAUSE = 1.0
#: Tries to write a batch's settlement before leaving it to lease expiry.
SETTLE_TRIES = 5


class Worker:
    """Consumes queue ``queue`` (a ``TASKCLAIM_QUEUES`` alias) with its
    registered claimed task.

    ``concurrency``: messages run side by side (threads).
    ``batch_size``: most messages per receive (default
    :func:`default_batch_size`, within what the queue takes). ``wait``: seconds one receive
    waits for a message; with ``burst`` the worker returns after a receive
    that waited this long for nothing (the queue is drained: delayed
    retries stay queued). ``max_messages``: return after receiving this
    many, or once a :class:`MessageBudget` shared with other workers is spent
    (a receive's surplus handed back). ``on_run`` gets a :class:`TaskRun` after
    each message (progress lines, metrics). ``task`` and ``backend`` override the registry and
    ``TASKCLAIM_QUEUES`` (tests). ``scheduler`` (what ``consume_claimed`` gives)
    enqueues the due slots of every schedule before each receive. Raises
    ``LookupError`` when no task is registered for the queue,
    ``ImproperlyConfigured`` for an unknown queue, ``TypeError``/``ValueError``
    for a bad argument.
    """

    def __init__(
        self,
        queue: str,
        *,
        concurrency: int = 1,
        batch_size: int | None = None,
        wait: float = 1.0,
        burst: bool = False,
        max_messages: int | MessageBudget | None = None,
        task: QueueConsumer | None = None,
        backend: BaseQueue | None = None,
        using: str | None = None,
        exit: Callable[[int], object] = os._exit,
        on_run: Callable[[TaskRun], object] | None = None,
        scheduler: Scheduler | None = None,
    ) -> None:
        self.backend = backend if backend is not None else create_queue(queue)
        self.task = task if task is not None else registry.get(queue)
        self.concurrency = validate_count("concurrency", concurrency)
        most = self.backend.max_batch_size
        if batch_size is None:
            batch_size = default_batch_size(self.concurrency)
            batch_size = batch_size if most is None else min(batch_size, most)
        self.batch_size = validate_count("batch_size", batch_size, maximum=most)
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait < 1e9:
            raise ValueError(f"wait must be a number of seconds from 0, got {wait!r}")
        self.wait = float(wait)
        self.burst = bool(burst)
        if max_messages is None or isinstance(max_messages, MessageBudget):
            self.budget = max_messages
        else:
            self.budget = MessageBudget(max_messages)
        self.max_messages = None if self.budget is None else self.budget.total
        self.queue = queue
        self.using = using
        self.stats = WorkerStats(queue)
        #: Held for every change of :attr:`stats` (threads share it).
        self.stats_lock = threading.Lock()
        self.on_run = on_run
        work = "the current message" if self.concurrency == 1 else "the running messages"
        name = f"consuming {queue}"
        self.stopper = TwoStageStop("worker", name, work=work, queue=queue, exit=exit)
        #: Enqueues the schedules' due slots once per loop turn (``None``: off).
        self.scheduler = scheduler
        self._backoff = Backoff(FIRST_BACKOFF, MAX_BACKOFF)
        self._lease_seconds: float | None = None
        self._received_at = 0.0

    recoverable = RECOVERABLE

    def __repr__(self) -> str:
        return f"<Worker {self.queue!r} task={self.task.name}>"

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self.stopper.requested

    def stop(self) -> None:
        """Finishes the running message (or messages), settles, then :meth:`run`
        returns. Safe from a signal handler or another thread."""
        self.stopper.request()

    def handle_signal(self, signum: int, frame: FrameType | None = None) -> None:
        """First call: :meth:`stop`. Second: exit the process at once."""
        self.stopper.handle_signal(signum, frame)

    def signal_handlers(self) -> AbstractContextManager[None]:
        """SIGTERM and SIGINT call :meth:`handle_signal` inside the block
        (main thread only)."""
        return self.stopper.signal_handlers()

    def run(self) -> WorkerStats:
        """Consumes until stopped, drained (``burst``) or ``max_messages``
        are received; returns the stats. ``TransactionManagementError``
        inside ``transaction.atomic()``: its writes must commit."""
        alias = self.using or app_settings.DATABASE
        connection = connections[alias]  # not connected: in no transaction, and may be down
        if connection.connection is not None and in_transaction(connection):
            raise TransactionManagementError(
                f"a worker of queue {self.queue!r} cannot run inside a transaction on "
                f"database {alias!r}: each claim write and settlement must commit"
            )
        logger.info(
            "consuming %s with %s",
            self.queue,
            self.task.name,
            extra={"event": "worker.started", "queue": self.queue, "task": self.task.name},
        )
        if not self.backend.supports_lease_extension:
            logger.info(
                "%s cannot extend leases: its lease must outlast a batch of %d messages",
                *(self.queue, self.batch_size),
                extra={"event": "worker.leases_not_extended", "queue": self.queue},
            )
        try:
            with event_loop_scope(), stopping_on_hang(self):  # async runs share a loop
                Loop(self).run()
        finally:
            self.backend.close()
        # The totals go in the record's fields; the text stays apart from
        # the per-batch lines (and the command prints the totals itself).
        logger.info(
            "stopped consuming %s after %d batches",
            *(self.queue, self.stats.batches),
            extra={
                "event": "worker.stopped",
                "received": self.stats.received,
                **self.stats.log_fields(),
            },
        )
        return self.stats

    def receive_limit(self) -> int:
        """How many the next receive may take: ``batch_size``, within what
        ``max_messages`` leaves (0 once reached)."""
        if self.budget is None:
            return self.batch_size
        return min(self.batch_size, self.budget.left)

    def _receive(self) -> MessageBatch | None:
        """The next non-empty batch, of :meth:`receive_limit` messages at
        most, or ``None`` to stop (stopped, drained with ``burst``, or
        ``max_messages`` received)."""
        while not self.stopper.requested:
            # Asked each turn: another worker may spend a shared budget.
            limit = self.receive_limit()
            if limit <= 0:
                return None
            if self.scheduler is not None:
                self.scheduler.tick()
            try:
                batch = self.backend.receive(max_messages=limit, wait_seconds=self.wait)
            except NotMigratedError:
                raise  # waiting would not help: someone has to run migrate
            except RECOVERABLE as error:
                self._recover(error, interruptible=True)
                continue
            self._received_at = time.monotonic()
            self._backoff.reset()
            if batch.messages:
                if self._within_budget(batch):
                    return batch
                continue  # the budget is spent: the next turn returns
            if self.burst:
                return None
            if self.wait == 0:
                self.stopper.wait(IDLE_PAUSE)
        return None

    def _within_budget(self, batch: MessageBatch) -> bool:
        """Counts the batch's messages in the budget, handing back at once
        those another worker's receive left no room for; whether any remain."""
        if self.budget is None:
            return True
        surplus = self.budget.trim(batch.messages)
        if surplus:
            self._settle(surplus)
            logger.info(
                "%s: handed back %d received past max_messages",
                *(printable(self.queue), len(surplus)),
                extra={"event": "worker.handed_back", "queue": self.queue},
            )
        return bool(batch.messages)

    def _finish_batch(
        self, batch: MessageBatch, summary: ConsumeSummary, unsettled: list[ReceivedMessage]
    ) -> None:
        """Counts the batch's ``summary``, settles ``unsettled`` and logs the batch."""
        with self.stats_lock:
            self.stats.merge(summary)
        self._settle(unsettled)
        if not logger.isEnabledFor(logging.INFO):
            return  # the line's text and fields are not built for nothing
        logger.info(
            "%s",
            summary.describe(f"{len(batch.messages)} received"),
            extra={
                "event": "worker.batch",
                "received": len(batch.messages),
                "retry_delays": list(summary.retry_delays),
                **summary.log_fields(),
            },
        )

    def _lease_keeper(self, messages: list[ReceivedMessage]) -> LeaseKeeper:
        """The :class:`LeaseKeeper` of the batch while it runs: it keeps the
        messages' claims, and their leases if the queue can extend them (and
        tell how long they are)."""
        if self.backend.supports_lease_extension and self._lease_seconds is None:
            self._lease_seconds = lease_length(self.backend)  # None: asked again next batch
        lease = self._lease_seconds if self.backend.supports_lease_extension else None
        return LeaseKeeper(
            self.backend,
            messages,
            lease_seconds=lease or None,
            leased_at=self._received_at,
            claims=self.using or app_settings.DATABASE,
        )

    def _settle(self, messages: list[ReceivedMessage]) -> None:
        for attempt in range(1, SETTLE_TRIES + 1):
            try:
                self.backend.settle(messages)
                if not self.backend.records_runs:  # the history, after the settlement
                    write_runs(self.using or app_settings.DATABASE, messages, queue=self.queue)
                return
            except RECOVERABLE as error:
                if attempt == SETTLE_TRIES:
                    with self.stats_lock:
                        self.stats.left_leased += len(messages)
                    logger.error(
                        "%s: could not settle a batch of %d; it is delivered again when its "
                        "leases run out",
                        *(printable(self.queue), len(messages)),
                        exc_info=True,
                        extra={"event": "worker.settle_failed", "queue": self.queue},
                    )
                    return
                self._recover(error, interruptible=False)

    def _recover(self, error: BaseException, *, interruptible: bool) -> None:
        """Logs ``error``, drops this thread's connections and waits the backoff."""
        with self.stats_lock:
            self.stats.database_errors += 1
        delay = self._backoff.next()
        # The error's text may quote a credential (a DSN, a refused header).
        shown = redact_configured(str(error), self.backend)
        logger.warning(
            "%s: %s: %s; reconnecting in %.1f s",
            *(printable(self.queue), type(error).__name__, printable(shown), delay),
            extra={"event": "worker.database_error", "queue": self.queue, "delay": delay},
        )
        self.backend.close()
        close_connections()
        if interruptible:
            self.stopper.wait(delay)
        else:
            threading.Event().wait(delay)
