"""The queue backend interface every queue implements.

A backend sends JSON bodies, receives them in batches of
:class:`ReceivedMessage`, and settles a batch (acks and delayed retries) in
one call. ``consume_claimed`` decides per message with ``ack()`` /
``retry()``; the worker then calls :meth:`BaseQueue.settle` once per batch.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from django.core import checks

from ..envelope import encode_json
from ..logtext import printable

logger = logging.getLogger(__name__)

#: Cloudflare Queues' longest retry delay, which every backend honours.
MAX_DELAY_SECONDS = 43_200

Settlement = Literal["ack", "retry"]


class QueueError(Exception):
    """A queue backend failed; the message names the queue and the cause."""


class PartlySentError(QueueError):
    """``send_many`` failed after the service had accepted some bodies.

    ``unsent`` lists the positions (in the sequence given to ``send_many``)
    of the bodies that were not sent; every other body was accepted, so a
    caller releases the claims of ``unsent`` only."""

    def __init__(self, message: str, *, unsent: Sequence[int]) -> None:
        super().__init__(message)
        self.unsent = tuple(unsent)


@dataclass(eq=False)
class ReceivedMessage:
    """One delivered message, as ``consume_claimed`` settles it.

    ``attempts`` counts deliveries, this one included (1 on the first).
    ``ack()`` and ``retry()`` only record the decision; the backend applies
    it in :meth:`BaseQueue.settle`. ``receipt`` is the backend's handle
    (lease id, receipt handle, row id).
    """

    body: Any
    attempts: int
    receipt: Any
    id: str = ""
    settlement: Settlement | None = field(default=None, init=False)
    delay_seconds: float = field(default=0, init=False)
    #: ``ExceptionClass: message`` of the failed run a retry follows, which a
    #: queue that can store it (PostgreSQL) keeps with the message.
    last_error: str | None = field(default=None, init=False)

    def ack(self) -> None:
        """Done with the message: the queue deletes it."""
        self.settlement = "ack"

    def retry(self, *, delay_seconds: float = 0) -> None:
        """Deliver the message again after ``delay_seconds``."""
        if isinstance(delay_seconds, bool) or not isinstance(delay_seconds, int | float):
            raise TypeError(f"delay_seconds must be a number, got {delay_seconds!r}")
        if not 0 <= delay_seconds <= MAX_DELAY_SECONDS:
            raise ValueError(
                f"delay_seconds must be in [0, {MAX_DELAY_SECONDS}], got {delay_seconds}"
            )
        self.settlement = "retry"
        self.delay_seconds = delay_seconds


@dataclass
class MessageBatch:
    """A received batch: the queue's alias and its messages, in order."""

    queue: str
    messages: list[ReceivedMessage]


@dataclass
class QueueStatus:
    """What a backend can tell about a queue's messages right now; ``None``
    where its engine does not say. ``ready``: receivable now; ``delayed``:
    waiting out a send or retry delay; ``leased``: received and not yet
    settled; ``oldest_age_seconds``: age of the oldest message. ``details``
    holds engine-specific figures (named as the engine names them)."""

    ready: int | None = None
    delayed: int | None = None
    leased: int | None = None
    oldest_age_seconds: float | None = None
    details: dict[str, Any] = field(default_factory=dict)


class BaseQueue(ABC):
    """A queue backend, configured under ``TASKCLAIM_QUEUES[alias]``.

    Capability flags (class attributes, overridable per instance):

    ``max_batch_size``
        Most messages one :meth:`receive` returns and one :meth:`send_many`
        call sends.
    ``max_delay_seconds``
        Longest retry delay (and send delay) the engine accepts.
    ``max_body_bytes``
        Largest encoded JSON body; :meth:`encode` rejects bigger ones
        before anything is sent.
    ``transactional``
        ``send`` joins the caller's database transaction (only a queue
        living in the claims database can): ``enqueue_claimed`` may then run
        inside ``transaction.atomic()``, and claim and message commit
        together.
    """

    max_batch_size: ClassVar[int] = 100
    max_delay_seconds: ClassVar[int] = MAX_DELAY_SECONDS
    max_body_bytes: ClassVar[int] = 128 * 1024
    transactional: ClassVar[bool] = False

    def __init__(self, alias: str, *, options: Mapping[str, Any] | None = None) -> None:
        self.alias = alias
        self.options: dict[str, Any] = dict(options or {})

    def __repr__(self) -> str:
        # Never show options: they may hold credentials.
        return f"<{type(self).__name__} {self.alias!r}>"

    @property
    def name(self) -> str:
        """The queue's name in batches and logs: its alias."""
        return self.alias

    def encode(self, body: Any) -> bytes:
        """``body`` as compact UTF-8 JSON (the message format's encoding),
        or ``TypeError`` / ``ValueError`` naming the queue: not
        JSON-serialisable, nested too deeply, holding a lone surrogate (not
        valid Unicode), or over ``max_body_bytes``."""
        text = encode_json(body, name=f"queue {self.alias!r}: body", root="body")
        encoded = text.encode("utf-8")
        self.check_body_size(len(encoded))
        return encoded

    def check_body_size(self, size: int) -> None:
        """``ValueError`` naming the queue if a body of ``size`` encoded
        bytes is over ``max_body_bytes``."""
        if size > self.max_body_bytes:
            raise ValueError(
                f"queue {self.alias!r}: body is {size} bytes, over the "
                f"{self.max_body_bytes}-byte limit"
            )

    @abstractmethod
    def send(self, body: Any, *, delay_seconds: float = 0) -> None:
        """Sends one JSON-serialisable ``body``."""

    def send_many(self, bodies: Sequence[Any]) -> None:
        """Sends ``bodies``; backends override this with a bulk call."""
        for body in bodies:
            self.send(body)

    @abstractmethod
    def receive(self, *, max_messages: int, wait_seconds: float = 0) -> MessageBatch:
        """Up to ``max_messages`` messages, leased to this consumer; waits up
        to ``wait_seconds`` for the first one. An empty batch is not an error."""

    @abstractmethod
    def settle(self, messages: Sequence[ReceivedMessage]) -> None:
        """Applies the recorded ``ack()``/``retry()`` of ``messages`` in as
        few calls as the engine allows; unsettled ones are left to their
        lease's expiry (and redelivered)."""

    def check(self) -> list[checks.CheckMessage]:
        """System-check messages about this queue's configuration."""
        return []

    def status(self) -> QueueStatus:
        """Message counts as far as the engine exposes them (``manage.py
        taskclaim_status``, metrics); the default knows nothing."""
        return QueueStatus()

    def configuration_errors(self) -> tuple[checks.CheckMessage, ...]:
        """The serious messages of :meth:`check`, which ``enqueue_claimed``
        turns into ``ImproperlyConfigured`` before claiming a key.

        Worked out on the first call and kept: this runs before every
        enqueue, and a backend's ``check()`` may be slow. A backend whose
        options can change after it is created overrides this.
        """
        errors: tuple[checks.CheckMessage, ...] | None = self.__dict__.get("_configuration_errors")
        if errors is None:
            errors = tuple(message for message in self.check() if message.is_serious())
            self._configuration_errors = errors
        return errors

    def _log_stale_settlements(self, stale: int, *, advice: str = "") -> None:
        """Warns (``queue.settle_stale``) that ``stale`` settlements were
        skipped: their lease ran out and another delivery owns the message."""
        logger.warning(
            "%s: %d settlements skipped: their lease ran out and the messages were "
            "delivered again%s",
            *(printable(self.alias), stale, f"; {advice}" if advice else ""),
            extra={"event": "queue.settle_stale", "queue": self.alias, "stale": stale},
        )

    def close(self) -> None:  # noqa: B027  (optional hook)
        """Releases connections; the queue may be used again afterwards."""
