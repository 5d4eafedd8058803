"""What consuming takes and gives: the :class:`Message` and :class:`Batch`
it settles, each message's :data:`Outcome` (and, in a worker, its
:class:`TaskRun`), and the counters of many in a :class:`ConsumeSummary`,
the one way they are printed, and a worker's totals (:class:`WorkerStats`)."""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol, Self

from astral_taskclaim.core.envelope import Envelope
from astral_taskclaim.core.logtext import counted, printable
from astral_taskclaim.core.validation import (
    validate_callable,
    validate_max_retries,
    validate_time_limit,
)
from astral_taskclaim.queues.runs import HistoryMode, RunNote

__all__ = ["ConsumeSummary", "MessageConsumer", "Outcome", "TaskOptions", "TaskRun", "WorkerStats"]

#: What became of one message: the :class:`ConsumeSummary` counter it adds to.
Outcome = Literal["ok", "retried", "failed", "malformed", "unparseable", "superseded"]


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
    """What was done with the messages of one queue: a batch's, or (as
    :class:`WorkerStats`) a worker's so far."""

    queue: str
    ok: int = 0
    retried: int = 0
    failed: int = 0
    malformed: int = 0
    unparseable: int = 0
    claim_write_failures: int = 0
    #: Of the retried, messages sent again to wait for a worker that has
    #: their task (a rolling deploy): not attempts of it.
    unknown_task: int = 0
    #: Of the retried, follow-up runs sent again to wait for the claim
    #: holding their key (:mod:`~astral_taskclaim.claims.trailing`).
    follow_up_waits: int = 0
    #: Of the retried, messages sent again to wait for a slot of their
    #: concurrency group (:mod:`~astral_taskclaim.consumer.concurrency`).
    concurrency_limited: int = 0
    #: Follow-up runs acked unrun: a later run took their place.
    superseded: int = 0
    #: Of the retried and failed, attempts that ran past their time limit.
    timed_out: int = 0
    #: Messages received but handed back unrun (a stop or a database error
    #: part way through a batch), visible again at once.
    returned: int = 0
    #: The delay of each retry, in seconds, after ``TASKCLAIM_DELAY_SCALE``.
    retry_delays: list[float] = field(default_factory=list)

    @property
    def messages(self) -> int:
        """Messages settled (each counts once: ok, retried, failed,
        malformed, unparseable or superseded)."""
        settled = self.ok + self.retried + self.failed + self.malformed + self.unparseable
        return settled + self.superseded

    def merge(self, other: ConsumeSummary) -> Self:
        """Adds the counters and retry delays of ``other``; returns ``self``."""
        self.ok += other.ok
        self.retried += other.retried
        self.failed += other.failed
        self.malformed += other.malformed
        self.unparseable += other.unparseable
        self.claim_write_failures += other.claim_write_failures
        self.unknown_task += other.unknown_task
        self.follow_up_waits += other.follow_up_waits
        self.concurrency_limited += other.concurrency_limited
        self.superseded += other.superseded
        self.timed_out += other.timed_out
        self.returned += other.returned
        self.retry_delays.extend(other.retry_delays)
        return self

    def counts(self) -> str:
        """``"1 ok, 0 retried, 0 failed, 0 malformed, 0 unparseable"``, and
        those waiting for their task and failed claim writes if any: the
        outcomes as every line prints them."""
        text = (
            f"{self.ok} ok, {self.retried} retried, {self.failed} failed, "
            f"{self.malformed} malformed, {self.unparseable} unparseable"
        )
        if self.unknown_task:
            text += f", {self.unknown_task} waiting for a worker that has their task"
        if self.follow_up_waits:
            text += f", {self.follow_up_waits} follow-ups waiting for their key"
        if self.concurrency_limited:
            text += f", {self.concurrency_limited} waiting for a concurrency slot"
        if self.superseded:
            text += f", {self.superseded} follow-ups superseded"
        if self.timed_out:
            text += f", {self.timed_out} timed out"
        if self.claim_write_failures:
            text += f", {self.claim_write_failures} claim writes failed"
        return text

    def describe(self, handled: str) -> str:
        """The one way counters are printed: ``"<queue>: <handled>, 1 ok, ..."``
        (``handled``: ``"5 messages"``), then messages returned unrun if any."""
        text = f"{self.queue}: {handled}, {self.counts()}"
        return f"{text}, {self.returned} returned unrun" if self.returned else text

    def log_fields(self) -> dict[str, object]:
        """The queue and the counters, as a log record's ``extra`` fields."""
        return {
            "queue": self.queue,
            "ok": self.ok,
            "retried": self.retried,
            "failed": self.failed,
            "malformed": self.malformed,
            "unparseable": self.unparseable,
            "claim_write_failures": self.claim_write_failures,
            "unknown_task": self.unknown_task,
            "follow_up_waits": self.follow_up_waits,
            "concurrency_limited": self.concurrency_limited,
            "superseded": self.superseded,
            "timed_out": self.timed_out,
            "returned": self.returned,
        }

    def __str__(self) -> str:
        return self.describe(counted(self.messages, "message"))


@dataclass(frozen=True)
class Decision:
    """What a run of a message's task decided: the outcome, whether the
    message is acked (else retried after ``delay_seconds``), whether the
    claim is released, and the failure (described, for the message)."""

    outcome: Outcome
    ack: bool
    release: bool = False
    delay_seconds: float = 0
    error: str | None = None
    exception: BaseException | None = None


@dataclass(frozen=True)
class TaskRun:
    """One message a worker ran: its key (``None`` for a body that is no
    claimed task), its delivery count, the outcome (``ok``, ``retried``,
    ``failed``, ``malformed`` or ``unparseable``) and how long it took.
    Printed, the key and the queue are :func:`printable`: a message's key
    is anyone's text (a newline, a terminal escape, a lone surrogate)."""

    queue: str
    key: str | None
    attempt: int
    outcome: Outcome
    duration_seconds: float

    def __str__(self) -> str:
        return (
            f"{printable(self.queue)}: {printable(self.key)} attempt {self.attempt}: "
            f"{printable(self.outcome)} in {self.duration_seconds:.3f} s"
        )


@dataclass
class WorkerStats(ConsumeSummary):
    """What a worker did so far: the totals of its batches' summaries
    (``ok``, ``retried``, ..., ``retry_delays``), and what happened around
    them."""

    batches: int = 0
    received: int = 0
    #: Messages not run: another delivery took them before their leases
    #: could be extended (the worker was stalled past its lease).
    leases_lost: int = 0
    database_errors: int = 0
    #: Messages whose settlement could not be written: leased until their
    #: leases run out, then delivered again.
    left_leased: int = 0
    #: Sync runs left running past their time limit (a thread cannot be
    #: stopped): the worker stopped, to exit for a restart.
    hung: int = 0

    def add(self, summary: ConsumeSummary) -> None:
        """Adds one batch's summary (:meth:`merge`)."""
        self.merge(summary)

    def __str__(self) -> str:
        return self.describe(f"{self.received} received")


#: Consuming one message, as a generator: it yields each awaitable the
#: task returns, for the caller to await (anywhere), and takes back the
#: result with ``send()`` or what it raised with ``throw()``; it returns the
#: :data:`Outcome`. ``consumer.event_loop.run_steps`` runs one on its thread.
Steps = Generator[Awaitable[object], object, Outcome]

#: Called inside the handler of a run's failure with the error and whether
#: it is the last attempt (so ``sys.exc_info()`` is the failure's).
FailureHook = Callable[[BaseException, bool], object]


class MessageConsumer(ABC):
    """Consumes one queue's messages one at a time (what a worker calls);
    :meth:`consume` goes through a batch."""

    __slots__ = ()

    @abstractmethod
    def consume_one(self, message: Message, summary: ConsumeSummary) -> Outcome:
        """Runs and settles ``message`` of queue ``summary.queue``; adds its
        outcome to ``summary`` and returns it."""

    def steps(self, message: Message, summary: ConsumeSummary) -> Steps:
        """:meth:`consume_one` as :data:`Steps`, so a worker running
        messages side by side awaits an ``async def`` task holding no
        thread; by default it runs :meth:`consume_one` and yields nothing."""
        return self.consume_one(message, summary)
        yield  # unreachable: makes this a generator

    def consume(self, batch: Batch) -> ConsumeSummary:
        """Consumes the batch's messages in order; what became of them."""
        summary = ConsumeSummary(queue=batch.queue)
        consume_one = self.consume_one
        for message in batch.messages:
            consume_one(message, summary)
        return summary


class Entry(Protocol):
    """What a queue's consumer (``consumer.consume.Consumer``) runs a
    message with: its hook before the run, which settles the message itself
    (returning the outcome) or gives the :class:`TaskOptions` (and hooks) to
    run it with. A claimed task, a Django Tasks backend's runner, or
    :class:`TaskOptions` themselves. An entry may also have a
    ``superseded(alias, found)`` hook, called for a trailing run's message
    acked unrun (:func:`~astral_taskclaim.consumer.trailing.begin`)."""

    def prepare(
        self, consumer: Any, message: Message, found: Envelope, summary: ConsumeSummary
    ) -> TaskOptions | Outcome: ...


class NamedEntry(Entry, Protocol):
    """An entry messages name: a claimed task."""

    @property
    def name(self) -> str: ...

    @property
    def default(self) -> bool: ...

    @property
    def window_seconds(self) -> float | None: ...


class ConcurrencyLimit(NamedTuple):
    """At most ``limit`` runs at once of each group: ``group`` itself, or
    what ``group(task)`` returns for a run's parsed task."""

    limit: int
    group: str | Callable[[Any], object]


class TaskOptions(NamedTuple):
    """How one message's task is run, as :func:`consume_claimed` takes
    them, and the hooks around the run: ``on_failure`` records a failed
    attempt, ``after`` gets the outcome once the message is settled,
    ``history`` notes the run in ``taskclaim.run``; ``time_limit`` is the
    run's, in seconds (``None``: none; see
    :mod:`~astral_taskclaim.consumer.time_limits`); ``concurrency`` limits
    the runs of its group at once."""

    parse: Callable[[Any], Any]
    run: Callable[[Any], object]
    max_retries: int
    retry_after_ms: Callable[[BaseException], object] | None = None
    on_failure: FailureHook | None = None
    after: Callable[[Outcome], object] | None = None
    history: RunNote | None = None
    time_limit: float | None = None
    concurrency: ConcurrencyLimit | None = None

    def prepare(self, *_: object) -> TaskOptions:
        """These options are the entry of a consumer running every message with them."""
        return self


def accept_task(task: Any) -> Any:
    """The default ``parse``: every task as it comes."""
    return task


def checked_options(options: TaskOptions) -> TaskOptions:
    """``options`` if each is valid; ``ValueError`` or ``TypeError`` naming the bad one."""
    validate_max_retries(options.max_retries)
    validate_callable(options.parse, name="parse")
    validate_callable(options.run, name="run")
    validate_callable(options.retry_after_ms, name="retry_after_ms", required=False)
    validate_callable(options.on_failure, name="on_failure", required=False)
    validate_callable(options.after, name="after", required=False)
    validate_time_limit(options.time_limit)
    return options


@functools.lru_cache(maxsize=1024)
def history_note(task: str, mode: HistoryMode) -> RunNote | None:
    """How the run history notes the runs of declared task ``task`` in
    ``mode`` (``TaskOptions.history``): made once, not for each message."""
    return None if mode == "none" else RunNote(task, failures_only=mode == "failures")
