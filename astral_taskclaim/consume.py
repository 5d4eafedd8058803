"""Consuming a batch of claimed-task messages: run, retry with backoff, give up.

:func:`consume_claimed` goes through a batch's messages in order, deciding
each with ``ack()`` or ``retry(delay_seconds=...)`` and writing its claim
(hold or release) before deciding. It logs on the ``astral_taskclaim.consume``
logger; every record's ``extra`` has ``event`` and ``queue``, and ``key``
and ``attempts`` where they are known:

==================================  =======  ========================================
Event                               Level    When
==================================  =======  ========================================
``queue.message_malformed``         warning  The body is not a claimed-task envelope.
``queue.task_unparseable``          warning  ``parse`` returned ``None`` or raised.
``queue.task_retrying``             info     ``run`` failed; a retry is due.
``queue.task_failed``               error    ``run`` failed for the last time.
``queue.claim_hold_failed``         error    Holding the claim for a retry failed.
``queue.claim_release_failed``      error    Releasing the claim failed.
==================================  =======  ========================================

It sends the signals of :mod:`~astral_taskclaim.signals` around each run.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol, Self, TypeVar

from asgiref.sync import async_to_sync
from django.db import connections, transaction

from . import signals
from .claims import (
    discard_broken_connection,
    hold_task,
    in_transaction,
    release_task,
    resolve_alias,
)
from .conf import app_settings
from .envelope import Envelope, parse_body
from .logtext import printable
from .queues.base import ReceivedMessage
from .redaction import redacting_filter
from .retry import requested_wait_ms, retry_delay_seconds

__all__ = ["Batch", "ConsumeSummary", "Message", "consume_claimed", "retry_delay_seconds"]

logger = logging.getLogger(__name__)
logger.addFilter(redacting_filter)

T = TypeVar("T")


class Message(Protocol):
    """A delivered message, as :func:`consume_claimed` settles it."""

    @property
    def body(self) -> Any: ...

    @property
    def attempts(self) -> int:
        """Deliveries so far, this one included: 1 on the first."""

    def ack(self) -> None: ...

    def retry(self, *, delay_seconds: float = ...) -> None: ...


class Batch(Protocol):
    """A received batch: the queue's name and its messages, in order."""

    @property
    def queue(self) -> str: ...

    @property
    def messages(self) -> Sequence[Message]: ...


@dataclass
class ConsumeSummary:
    """What :func:`consume_claimed` did with one batch."""

    queue: str
    ok: int = 0
    retried: int = 0
    failed: int = 0
    malformed: int = 0
    unparseable: int = 0
    claim_write_failures: int = 0
    #: The delay of each retry, in seconds, after ``TASKCLAIM_DELAY_SCALE``.
    retry_delays: list[float] = field(default_factory=list)

    @property
    def messages(self) -> int:
        """Messages settled (each counts once: ok, retried, failed,
        malformed or unparseable)."""
        return self.ok + self.retried + self.failed + self.malformed + self.unparseable

    def merge(self, other: ConsumeSummary) -> Self:
        """Adds the counters and retry delays of ``other``; returns ``self``."""
        self.ok += other.ok
        self.retried += other.retried
        self.failed += other.failed
        self.malformed += other.malformed
        self.unparseable += other.unparseable
        self.claim_write_failures += other.claim_write_failures
        self.retry_delays.extend(other.retry_delays)
        return self

    def describe(self, handled: str) -> str:
        """The one way counters are printed: ``"<queue>: <handled>, 1 ok, ..."``
        (``handled``: ``"5 messages"``); failed claim writes only if any."""
        text = (
            f"{self.queue}: {handled}, {self.ok} ok, {self.retried} retried, "
            f"{self.failed} failed, {self.malformed} malformed, {self.unparseable} unparseable"
        )
        if self.claim_write_failures:
            text += f", {self.claim_write_failures} claim writes failed"
        return text

    def __str__(self) -> str:
        return self.describe(f"{self.messages} messages")


@dataclass(frozen=True)
class _Decision:
    ack: bool
    release: bool = False
    delay_seconds: float = 0
    error: str | None = None


@dataclass(frozen=True)
class _Options:
    parse: Callable[[Any], Any]
    run: Callable[[Any], object]
    max_retries: int
    retry_after_ms: Callable[[BaseException], object] | None
    scale: float


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
      :func:`~astral_taskclaim.envelope.parse_body`).
    - ``parse(task)`` returning ``None`` or raising: logged, claim released, acked.
    - ``run(task)`` returning: acked; the claim is kept to the end of its
      window, so triggers inside the window coalesce. (``run`` may return an
      awaitable, which is awaited.) ``run`` must be idempotent: delivery is
      at least once.
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
    any message is touched. Only ``Exception`` counts as a failure;
    ``KeyboardInterrupt`` and ``SystemExit`` propagate.
    """
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"max_retries must be an int from 0, got {max_retries!r}")
    for name, function in (("parse", parse), ("run", run)):
        if not callable(function):
            raise TypeError(f"{name} must be callable, got {type(function).__name__}")
    if retry_after_ms is not None and not callable(retry_after_ms):
        raise TypeError(f"retry_after_ms must be callable, got {type(retry_after_ms).__name__}")
    alias = resolve_alias(using)
    if in_transaction(connections[alias]):
        raise transaction.TransactionManagementError(
            "consume_claimed() cannot run inside a transaction: each claim write must "
            "commit before its message is settled."
        )
    options = _Options(parse, run, max_retries, retry_after_ms, app_settings.DELAY_SCALE)
    queue = batch.queue
    summary = ConsumeSummary(queue=queue)
    for message in batch.messages:
        found = parse_body(message.body)
        if found is None:
            logger.warning(
                "%s message is not a claimed task; acked",
                printable(queue),
                extra={"event": "queue.message_malformed", "queue": queue},
            )
            message.ack()
            summary.malformed += 1
            continue
        decision = _attempt(queue, found, message.attempts, options, summary)
        _write_claim(alias, queue, found, decision, summary)
        if decision.ack:
            message.ack()
        else:
            message.retry(delay_seconds=decision.delay_seconds)
            if isinstance(message, ReceivedMessage):
                message.last_error = decision.error
    return summary


def _attempt(
    queue: str, found: Envelope, attempts: int, options: _Options, summary: ConsumeSummary
) -> _Decision:
    """Parses and runs one task: what to do with its message and claim."""
    unparseable = {"event": "queue.task_unparseable", "queue": queue, "key": found.key}
    text = "%s task %s is unparseable; claim released, acked"
    shown = (printable(queue), printable(found.key))
    try:
        task = options.parse(found.task)
    except Exception:
        logger.warning(text, *shown, exc_info=True, extra=unparseable)
        summary.unparseable += 1
        return _Decision(ack=True, release=True)
    if task is None:
        logger.warning(text, *shown, extra=unparseable)
        summary.unparseable += 1
        return _Decision(ack=True, release=True)
    about = {"key": found.key, "claim": found.claim, "attempts": attempts, "task": task}
    signals.send(signals.task_started, queue, about)
    try:
        result = options.run(task)
        if inspect.isawaitable(result):
            async_to_sync(_wait)(result)
    except Exception as error:
        extra = {"queue": queue, "key": found.key, "attempts": attempts}
        if attempts <= options.max_retries:
            wait = requested_wait_ms(options.retry_after_ms, error)
            # A backend counting from 0 would make the schedule raise; count from 1.
            delay = retry_delay_seconds(max(attempts, 1), wait)
            # Scale 1 (the default) keeps the TypeScript package's whole seconds exactly.
            scaled = delay if options.scale == 1.0 else round(delay * options.scale, 3)
            logger.info(
                "%s task %s failed (attempt %d); retrying in %s s",
                *(*shown, attempts, scaled),
                exc_info=True,
                extra={"event": "queue.task_retrying", **extra},
            )
            summary.retried += 1
            summary.retry_delays.append(scaled)
            retried = {**about, "error": error, "delay_seconds": scaled}
            signals.send(signals.task_retried, queue, retried)
            return _Decision(ack=False, delay_seconds=scaled, error=describe_error(error))
        logger.error(
            "%s task %s failed after %d attempt%s",
            *(*shown, attempts, "" if attempts == 1 else "s"),
            exc_info=True,
            extra={"event": "queue.task_failed", **extra},
        )
        summary.failed += 1
        signals.send(signals.task_gave_up, queue, {**about, "error": error})
        return _Decision(ack=True, release=True)
    summary.ok += 1
    signals.send(signals.task_finished, queue, about)
    return _Decision(ack=True)


#: Longest error text kept with a queued message.
MAX_ERROR_CHARS = 2000


def describe_error(error: BaseException) -> str:
    """``ExceptionClass: message``, cut to :data:`MAX_ERROR_CHARS`."""
    text = f"{type(error).__qualname__}: {error}" if str(error) else type(error).__qualname__
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


async def _wait(awaitable: Awaitable[object]) -> None:
    await awaitable


def _write_claim(
    alias: str, queue: str, found: Envelope, decision: _Decision, summary: ConsumeSummary
) -> None:
    """Holds or releases the message's claim as decided; logs a failure."""
    if decision.ack and not decision.release:
        return
    connection = connections[alias]
    try:
        with _savepoint_if_in_atomic(alias):
            if decision.ack:
                release_task(found.key, found.claim, using=alias)
            else:
                hold_task(
                    found.key,
                    found.claim,
                    delay_seconds=decision.delay_seconds,
                    window_seconds=found.window_seconds,
                    using=alias,
                )
    except Exception:
        summary.claim_write_failures += 1
        if decision.ack:
            event, text = "queue.claim_release_failed", "release failed; acked, key claimed"
        else:
            event, text = "queue.claim_hold_failed", "hold failed; retrying"
        logger.error(
            "%s task %s: claim %s",
            *(printable(queue), printable(found.key), text),
            exc_info=True,
            extra={"event": event, "queue": queue, "key": found.key},
        )
        discard_broken_connection(connection)


def _savepoint_if_in_atomic(alias: str) -> AbstractContextManager[object]:
    # Only reachable inside a TestCase's own atomic block: a savepoint keeps
    # a failed claim write from aborting the test's transaction.
    if connections[alias].in_atomic_block:
        return transaction.atomic(using=alias)
    return nullcontext()
