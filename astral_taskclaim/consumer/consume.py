"""Consuming claimed-task messages: run, retry with backoff, give up.

The core is per message: :meth:`Consumer.consume_one` runs one message's
task, writes its claim (hold or release) and then settles the message with
``ack()`` or ``retry(delay_seconds=...)``, adding the outcome to a
:class:`ConsumeSummary`. :func:`consume_claimed` goes through a batch with
it; the worker calls it for each message it runs and settles the batch with
the queue afterwards. It logs on the ``astral_taskclaim.consumer.consume`` logger;
every record's ``extra`` has ``event`` and ``queue``, and ``key`` and
``attempts`` where they are known (the events: :doc:`/observability`).

:meth:`Consumer.consume_one` sends the signals of
:mod:`~astral_taskclaim.signals` around each run; it is the only place that
sends them.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from asgiref.sync import async_to_sync
from django.db import connections, transaction

from astral_taskclaim import signals
from astral_taskclaim.claims.claim import hold_task, release_task
from astral_taskclaim.claims.writing import discard_broken_connection, in_transaction, resolve_alias
from astral_taskclaim.consumer import failures
from astral_taskclaim.consumer.event_loop import run_steps
from astral_taskclaim.consumer.retry import RetryAfter, requested_wait_ms, retry_delay_seconds
from astral_taskclaim.consumer.summary import (
    Batch,
    ConsumeSummary,
    FailureHook,
    Message,
    MessageConsumer,
    Outcome,
    Steps,
    TaskOptions,
    checked_options,
)
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.envelope import Envelope, parse_body
from astral_taskclaim.core.logtext import printable
from astral_taskclaim.core.redaction import redacting_filter
from astral_taskclaim.db.connections import savepoint_if_in_atomic
from astral_taskclaim.queues.messages import ReceivedMessage
from astral_taskclaim.queues.runs import RunNote

__all__ = ["Consumer", "consume_claimed"]

logger = logging.getLogger(__name__)
logger.addFilter(redacting_filter)

T = TypeVar("T")


@dataclass(frozen=True)
class _Decision:
    outcome: Outcome
    ack: bool
    release: bool = False
    delay_seconds: float = 0
    error: str | None = None
    exception: BaseException | None = None  # the failure, for the run history


_OK = _Decision("ok", ack=True)
_UNPARSEABLE = _Decision("unparseable", ack=True, release=True)
_GAVE_UP = _Decision("failed", ack=True, release=True)


@dataclass(frozen=True, slots=True)
class Consumer(MessageConsumer):
    """A task's options (see :func:`consume_claimed`) on database ``alias``,
    delays scaled by ``scale``, runs noted by ``history``; made by
    :meth:`create` once per batch, which reads the settings."""

    parse: Callable[[Any], Any]
    run: Callable[[Any], object]
    max_retries: int
    retry_after_ms: Callable[[BaseException], object] | None
    on_failure: FailureHook | None
    alias: str
    scale: float
    history: RunNote | None = None

    @classmethod
    def create(
        cls, options: TaskOptions, *, using: str | None = None, history: RunNote | None = None
    ) -> Consumer:
        """Checks ``options`` and that ``using`` is in no transaction (raising
        as :func:`consume_claimed` does); reads ``TASKCLAIM_DELAY_SCALE``."""
        checked_options(options)
        alias = resolve_alias(using)
        if in_transaction(connections[alias]):
            raise transaction.TransactionManagementError(
                "consume_claimed() cannot run inside a transaction: each claim write must "
                "commit before its message is settled."
            )
        return cls(*options, alias=alias, scale=app_settings.DELAY_SCALE, history=history)

    def for_task(self, options: TaskOptions) -> Consumer:
        """This consumer with another task's options (settings not read again)."""
        return Consumer(
            *checked_options(options), alias=self.alias, scale=self.scale, history=self.history
        )

    def consume_one(self, message: Message, summary: ConsumeSummary) -> Outcome:
        """Runs ``message``'s task, writes its claim, then settles it (see
        :func:`consume_claimed`); adds the outcome to ``summary``."""
        return run_steps(self.steps(message, summary))

    def steps(self, message: Message, summary: ConsumeSummary) -> Steps:
        """:meth:`consume_one`, yielding the awaitable an ``async def`` task
        returns instead of awaiting it."""
        queue = summary.queue
        found = parse_body(message.body)
        if found is None:
            return self.malformed(message, summary, "not a claimed task")
        history, started = self.history, time.time()
        unsettled = getattr(message, "unsettled_before", False)
        decision = yield from self._attempt(queue, found, message.attempts, unsettled, summary)
        if history is not None and isinstance(message, ReceivedMessage):
            message.run = history.note(queue, found, message.attempts, decision, started)
        if decision.release or not decision.ack:
            self.write_claim(queue, found, summary, decision.ack, decision.delay_seconds)
        if decision.ack:
            message.ack()
        else:
            message.retry(delay_seconds=decision.delay_seconds)
            if isinstance(message, ReceivedMessage):
                message.last_error = decision.error
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
        self, queue: str, found: Envelope, attempts: int, unsettled: bool, summary: ConsumeSummary
    ) -> Generator[Awaitable[object], object, _Decision]:
        """Parses and runs one task: what to do with its message and claim.
        An awaitable the run returns is yielded, and what it raised is
        thrown back in here, so the failure is handled as a sync one's."""
        try:
            task = self.parse(found.task)
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
            if attempts - unsettled > self.max_retries + 1:
                raise failures.DeliveriesExhausted(attempts, self.max_retries)
            signals.send(signals.task_started, queue, found, attempts, task)
            result = self.run(task)
            if result is not None and inspect.isawaitable(result):
                if connections[self.alias].in_atomic_block:
                    # Only a TestCase's (consuming refuses a transaction):
                    # the run's ORM calls stay on this thread's connection,
                    # in the test's transaction.
                    async_to_sync(_wait)(result)
                else:
                    # Awaited by the caller on the process's one event loop,
                    # beside every other async run (see consumer.event_loop).
                    yield result
            if failures.roll_back_left_open(self.alias):
                raise failures.TransactionLeftOpen(self.alias)
        except BaseException as error:
            if not failures.is_task_failure(error):
                raise
            failures.roll_back_left_open(self.alias)  # before the claim write that follows
            # Decided inside the handler: the failure hook and the signal
            # receivers see it as sys.exc_info().
            return self._failed(queue, found, attempts, task, error, summary)
        summary.ok += 1
        signals.send(signals.task_finished, queue, found, attempts, task)
        return _OK

    def _failed(
        self,
        queue: str,
        found: Envelope,
        attempts: int,
        task: Any,
        error: BaseException,
        summary: ConsumeSummary,
    ) -> _Decision:
        """A failed attempt (called inside its exception handler): retried,
        or given up for the last time."""
        # Escaped only here: a run that returns logs nothing.
        shown = (printable(queue), printable(found.key))
        extra = {"queue": queue, "key": found.key, "attempts": attempts}
        final = attempts > self.max_retries
        if self.on_failure is not None:
            # A failed write of the failure (the database is gone) leaves the
            # message unsettled, to be delivered again: it raises from here.
            self.on_failure(error, final)
        if not final:
            wait = requested_wait_ms(self.retry_after_ms, error)
            # A backend counting from 0 would make the schedule raise; count from 1.
            delay = retry_delay_seconds(max(attempts, 1), wait)
            # Scale 1 (the default) keeps the TypeScript package's whole seconds exactly.
            scaled = delay if self.scale == 1.0 else round(delay * self.scale, 3)
            logger.info(
                "%s task %s failed (attempt %d); retrying in %s s",
                *(*shown, attempts, scaled),
                exc_info=not isinstance(error, RetryAfter),  # a planned retry: no traceback
                extra={"event": "queue.task_retrying", **extra},
            )
            summary.retried += 1
            summary.retry_delays.append(scaled)
            more = {"error": error, "delay_seconds": scaled}
            signals.send(signals.task_retried, queue, found, attempts, task, **more)
            return _Decision(
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
    ) -> _Decision:
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

    Each message goes through :meth:`Consumer.consume_one`, as in the worker.
    """
    options = TaskOptions(parse, run, max_retries, retry_after_ms)
    return Consumer.create(options, using=using).consume(batch)


async def _wait(awaitable: Awaitable[object]) -> None:
    await awaitable
