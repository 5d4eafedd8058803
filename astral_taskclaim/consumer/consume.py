"""Consuming claimed-task messages: run, retry with backoff, give up.

A queue's one :class:`Consumer` holds its entries by task name and runs a
message one way: it finds the entry the message names (or waits for a
worker that has it: :mod:`~astral_taskclaim.consumer.deferral`), calls the
entry's ``prepare`` hook, runs the task with the options it gives, writes
the claim (hold or release), settles the message with ``ack()`` or
``retry(delay_seconds=...)``, calls the ``after`` hook and counts the
outcome. :func:`consume_claimed` and the worker use it. Its log records'
``extra`` have ``event`` and ``queue``, and ``key`` and ``attempts`` where
known (the events: :doc:`/observability`). It is the only place that sends
the signals of :mod:`~astral_taskclaim.signals`, around each run.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from django.db import connections, transaction

from astral_taskclaim import signals
from astral_taskclaim.claims.claim import hold_task, release_task
from astral_taskclaim.claims.writing import discard_broken_connection, in_transaction, resolve_alias
from astral_taskclaim.consumer import concurrency, failures, observe, retry, time_limits, trailing
from astral_taskclaim.consumer.deferral import unknown_task
from astral_taskclaim.consumer.event_loop import run_steps
from astral_taskclaim.consumer.summary import (
    Batch,
    ConsumeSummary,
    Decision,
    Entry,
    Message,
    MessageConsumer,
    NamedEntry,
    Outcome,
    Steps,
    TaskOptions,
    checked_options,
)
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.envelope import Envelope, parse_body, task_name_of
from astral_taskclaim.core.logtext import printable
from astral_taskclaim.core.redaction import redacting_filter
from astral_taskclaim.db.connections import savepoint_if_in_atomic
from astral_taskclaim.queues import ReceivedMessage, queue_time_limit
from astral_taskclaim.queues.runs import HistoryMode, queue_history

__all__ = ["Consumer", "consume_claimed"]

logger = logging.getLogger(__name__)
logger.addFilter(redacting_filter)

T = TypeVar("T")

_OK = Decision("ok", ack=True)
_UNPARSEABLE = Decision("unparseable", ack=True, release=True)
_GAVE_UP = Decision("failed", ack=True, release=True)


class Consumer(MessageConsumer):
    """The consumer of queue ``queue``: its entries by task name, the
    default one for a message that names none (the one entry of a queue of
    one), or only ``default``, which takes every message. :meth:`consumer`
    binds it to a database for a batch; :meth:`steps` is the one way a
    message is run."""

    __slots__ = ("alias", "default", "history", "name", "queue", "scale", "tasks", "time_limit")

    def __init__(
        self, queue: str, tasks: Sequence[NamedEntry] = (), *, default: Entry | None = None
    ) -> None:
        self.queue = queue
        self.tasks = {task.name: task for task in tasks}
        if default is None:
            default = next((t for t in tasks if t.default or len(tasks) == 1), None)
        self.default = default
        self.name = ", ".join(self.tasks) or str(getattr(default, "name", ""))
        self.alias, self.scale = "", 1.0
        self.history: HistoryMode = "none"
        self.time_limit: float | None = None

    @property
    def window_seconds(self) -> float | None:
        """The default entry's window (of a message enqueued by hand that gives none)."""
        return getattr(self.default, "window_seconds", None)

    def knows(self, named: object) -> bool:
        """Whether a message naming task ``named`` (``None``: none) has its task here."""
        if named is None:
            return self.default is not None
        return isinstance(named, str) and named in self.tasks

    def consumer(self, *, using: str | None = None) -> Consumer:
        """This consumer on database ``using`` for a batch (raising as
        :func:`consume_claimed` does); reads ``TASKCLAIM_DELAY_SCALE`` and,
        for claimed tasks, the queue's ``HISTORY``; its ``TIME_LIMIT``."""
        alias = resolve_alias(using)
        if in_transaction(connections[alias]):
            raise transaction.TransactionManagementError(
                "consume_claimed() cannot run inside a transaction: each claim write must "
                "commit before its message is settled."
            )
        bound = copy.copy(self)
        bound.alias, bound.scale = alias, app_settings.DELAY_SCALE
        bound.history = queue_history(self.queue) if self.tasks else "none"
        bound.time_limit = queue_time_limit(self.queue)
        return bound

    def consume_one(self, message: Message, summary: ConsumeSummary) -> Outcome:
        """Runs ``message`` as :func:`consume_claimed` does; adds the outcome to ``summary``."""
        return run_steps(self.steps(message, summary))

    def steps(self, message: Message, summary: ConsumeSummary) -> Steps:
        """:meth:`consume_one`, yielding an ``async def`` task's awaitable instead."""
        found = parse_body(message.body)
        if found is None:
            return self.malformed(message, summary, "not a claimed task")
        named = task_name_of(message.body) if self.tasks else None
        entry = self.default if named is None else None
        if isinstance(named, str):
            entry = self.tasks.get(named)
        begun = trailing.begin(self, message, found, summary, entry)  # the hook then sees
        if not isinstance(begun, Envelope):  # a follow-up's own task
            return begun  # a follow-up that waits, or was superseded
        if entry is None:
            options = unknown_task(self, message, begun, summary, named)
        else:
            options = entry.prepare(self, message, begun, summary)
        if not isinstance(options, TaskOptions):
            return options  # settled by the hook
        if isinstance(slot := concurrency.take(self, options, begun, message, summary), str):
            return slot  # waits for a slot of its group
        found, history, started = begun, options.history, time.time()
        attempt = self._attempt(options, found, message, summary)
        attempt = observe.observed(attempt, summary.queue, entry, found, message)
        decision = yield from concurrency.holding(self.alias, summary.queue, slot, attempt)
        if history is not None and isinstance(message, ReceivedMessage):
            message.run = history.note(summary.queue, found, message.attempts, decision, started)
        if decision.release or not decision.ack:
            self.write_claim(summary.queue, found, summary, decision.ack, decision.delay_seconds)
        if decision.ack:
            message.ack()
        else:
            message.retry(delay_seconds=decision.delay_seconds)
            if isinstance(message, ReceivedMessage):
                message.last_error = decision.error
        if options.after is not None:
            options.after(decision.outcome)
        return decision.outcome

    def malformed(self, message: Message, summary: ConsumeSummary, reason: str) -> Outcome:
        """Acks ``message`` as malformed, touching no claim, logging ``reason``."""
        queue = summary.queue
        logger.warning(
            "%s message is malformed (%s); acked",
            *(printable(queue), printable(reason)),
            extra={"event": "queue.message_malformed", "queue": queue, "reason": reason},
        )
        message.ack()
        summary.malformed += 1
        return "malformed"

    def _attempt(
        self, options: TaskOptions, found: Envelope, message: Message, summary: ConsumeSummary
    ) -> Generator[Awaitable[object], object, Decision]:
        """Parses and runs one task: what to do with its message and claim.
        An awaitable the run returns is yielded, and what it raised is
        thrown back in here, so the failure is handled as a sync one's."""
        queue, attempts = summary.queue, message.attempts
        unsettled = getattr(message, "unsettled_before", False)
        try:
            task = options.parse(found.task)
        except BaseException as error:
            if not failures.is_task_failure(error):
                raise
            return self._unparseable(queue, found, summary, error=error)
        if task is None:
            return self._unparseable(queue, found, summary, error=None)
        try:
            # Past its attempts, a message was delivered and never settled:
            # each delivery ended its worker, so it is not run once more. Its
            # last delivery, unsettled, may have been a batch-mate's kill.
            if attempts - unsettled > options.max_retries + 1:
                raise failures.DeliveriesExhausted(attempts, options.max_retries)
            signals.send(signals.task_started, queue, found, attempts, task)
            yield from time_limits.run_within(options, task, found, attempts, summary, self)
        except BaseException as error:
            if not failures.is_task_failure(error):
                raise
            failures.roll_back_left_open(self.alias)  # before the claim write that follows
            # Decided inside the handler: the failure hook and the signal
            # receivers see it as sys.exc_info().
            return self._failed(options, queue, found, attempts, task, error, summary)
        summary.ok += 1
        signals.send(signals.task_finished, queue, found, attempts, task)
        return _OK

    def _failed(
        self,
        options: TaskOptions,
        queue: str,
        found: Envelope,
        attempts: int,
        task: Any,
        error: BaseException,
        summary: ConsumeSummary,
    ) -> Decision:
        """A failed attempt (called inside its exception handler): retried, or given up."""
        # Escaped only here: a run that returns logs nothing.
        shown = (printable(queue), printable(found.key))
        extra = {"queue": queue, "key": found.key, "attempts": attempts}
        final = attempts > options.max_retries
        if options.on_failure is not None:
            # A failed write of the failure (the database is gone) leaves the
            # message unsettled, to be delivered again: it raises from here.
            options.on_failure(error, final)
        if not final:
            wait = retry.requested_wait_ms(options.retry_after_ms, error)
            # A backend counting from 0 would make the schedule raise; count from 1.
            delay = retry.retry_delay_seconds(max(attempts, 1), wait)
            scaled = retry.scaled_delay(delay, self.scale)
            logger.info(
                "%s task %s failed (attempt %d); retrying in %s s",
                *(*shown, attempts, scaled),
                exc_info=not isinstance(error, retry.RetryAfter),  # a planned retry: no traceback
                extra={"event": "queue.task_retrying", **extra},
            )
            summary.retried += 1
            summary.retry_delays.append(scaled)
            more = {"error": error, "delay_seconds": scaled}
            signals.send(signals.task_retried, queue, found, attempts, task, **more)
            return Decision(
                "retried",
                ack=False,
                delay_seconds=scaled,
                error=failures.describe_error(error),
                exception=error,
            )
        if isinstance(error, failures.DeliveriesExhausted):
            logger.error(
                "%s task %s: %s",
                *(*shown, error),
                extra={"event": "queue.task_abandoned", **extra},
            )
        else:
            logger.error(
                "%s task %s failed after %d attempt%s",
                *(*shown, attempts, "" if attempts == 1 else "s"),
                exc_info=True,
                extra={"event": "queue.task_failed", **extra},
            )
        summary.failed += 1
        signals.send(signals.task_gave_up, queue, found, attempts, task, error=error)
        return replace(_GAVE_UP, exception=error)

    def _unparseable(
        self, queue: str, found: Envelope, summary: ConsumeSummary, *, error: BaseException | None
    ) -> Decision:
        logger.warning(
            "%s task %s is unparseable; claim released, acked",
            *(printable(queue), printable(found.key)),
            exc_info=error,
            extra={"event": "queue.task_unparseable", "queue": queue, "key": found.key},
        )
        summary.unparseable += 1
        return _UNPARSEABLE if error is None else replace(_UNPARSEABLE, exception=error)

    def write_claim(
        self, queue: str, found: Envelope, summary: ConsumeSummary, release: bool, delay: float
    ) -> None:
        """Releases the claim, or holds it ``delay`` seconds and a window; logs a failure."""
        alias = self.alias
        try:
            # Only in a TestCase's own atomic block (consuming refuses a
            # transaction): a failed claim write must not abort the test's.
            with savepoint_if_in_atomic(alias):
                if release:
                    release_task(found.key, found.claim, using=alias)
                else:
                    hold_task(
                        found.key,
                        found.claim,
                        delay_seconds=delay,
                        window_seconds=found.window_seconds,
                        using=alias,
                    )
        except Exception:
            summary.claim_write_failures += 1
            if release:
                event, text = "queue.claim_release_failed", "release failed; acked, key claimed"
            else:
                event, text = "queue.claim_hold_failed", "hold failed; retrying"
            logger.error(
                "%s task %s: claim %s",
                *(printable(queue), printable(found.key), text),
                exc_info=True,
                extra={"event": event, "queue": queue, "key": found.key},
            )
            discard_broken_connection(connections[alias])


def consume_claimed(
    batch: Batch,
    *,
    parse: Callable[[Any], T | None],
    run: Callable[[T], object],
    max_retries: int,
    retry_after_ms: Callable[[BaseException], object] | None = None,
    using: str | None = None,
) -> ConsumeSummary:
    """Runs a batch of claimed tasks, in order, and decides each message.

    - A body that is not an envelope is logged and acked; no claim is touched.
      That includes a body whose key or window no claim function accepts
      (an empty key, one with NUL or over 1024 UTF-8 bytes, a window of
      1e300 seconds): its claim cannot exist (see
      :func:`~astral_taskclaim.core.envelope.parse_body`).
    - ``parse(task)`` returning ``None`` or raising: logged, claim released, acked.
    - ``run(task)`` returning: acked; the claim is kept to the end of its
      window, so triggers inside the window coalesce. (``run`` may return an
      awaitable, which is awaited on the process's one event loop.) ``run``
      must be idempotent: delivery is at least once.
    - ``run`` raising with ``attempts <= max_retries``: retried after
      :func:`retry_delay_seconds` (with ``retry_after_ms(exception)``; a
      raising ``retry_after_ms`` counts as none), times
      ``TASKCLAIM_DELAY_SCALE``; the claim is held by its token through the
      delay and one more window.
    - ``run`` raising for the last time: logged with the attempt count,
      claim released (if still ours), acked.

    A failed claim write is logged and the message is settled as decided (a
    failed hold still retries, a failed release still acks); the batch goes
    on. Each claim write commits before its message is settled, so this
    raises ``TransactionManagementError`` inside ``transaction.atomic()``.
    ``max_retries`` other than an int from 0 raises ``ValueError`` before
    any message is touched. Whatever ``parse`` or ``run`` raises is the
    task's failure, ``SystemExit`` and ``KeyboardInterrupt`` included (see
    :mod:`~astral_taskclaim.consumer.failures` for the one Ctrl-C that propagates).
    A message delivered more than ``max_retries + 1`` times (its earlier
    deliveries never settled: each ended its worker) is given up without
    running: logged as ``queue.task_abandoned``, claim released, acked.
    """
    options = checked_options(TaskOptions(parse, run, max_retries, retry_after_ms))
    return Consumer(batch.queue, default=options).consumer(using=using).consume(batch)
