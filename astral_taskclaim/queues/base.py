"""The queue backend interface every queue implements.

A backend sends JSON bodies, receives them in batches of
:class:`~astral_taskclaim.queues.messages.ReceivedMessage`, and settles a
batch (acks and delayed retries) in one call. ``consume_claimed`` decides
per message with ``ack()`` / ``retry()``; the worker then calls
:meth:`BaseQueue.settle` once per batch.
"""

from __future__ import annotations

import functools
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from django.core import checks

from astral_taskclaim.core.envelope import body_writer, encode_json, message_body
from astral_taskclaim.core.logtext import printable
from astral_taskclaim.core.validation import raise_misconfigured
from astral_taskclaim.queues.messages import MAX_DELAY_SECONDS, MessageBatch, ReceivedMessage
from astral_taskclaim.queues.options import Option, Problem, Secret, parse_options

__all__ = [
    "BaseQueue",
    "ClaimedInsert",
    "PartlySentError",
    "QueueError",
    "QueueStatus",
    "TextWriter",
    "encoding_writer",
    "json_writer",
    "writer_of",
]

logger = logging.getLogger(__name__)


class QueueError(Exception):
    """A queue backend failed; the message names the queue and the cause.
    ``retry_after``: seconds the service asked to wait (``Retry-After``), if any."""

    retry_after: float | None = None


class PartlySentError(QueueError):
    """``send_many`` failed after the service had accepted some bodies.

    ``unsent`` lists the positions (in the sequence given to ``send_many``)
    of the bodies that were not sent; every other body was accepted, so a
    caller releases the claims of ``unsent`` only."""

    def __init__(self, message: str, *, unsent: Sequence[int]) -> None:
        super().__init__(message)
        self.unsent = tuple(unsent)


#: Writes the encoded text of one claimed body from ``(key, token, task,
#: task_json)``, ``task_json`` being ``task`` as :func:`encode_json` wrote it.
TextWriter = Callable[[str, str, Any, str], str]


@dataclass(frozen=True)
class ClaimedInsert:
    """How a queue inserts its messages in the statement that claims their
    keys, so both commit together (see :meth:`BaseQueue.claimed_insert`).

    ``one``: the SQL file for one key, returning the token if it claimed it;
    ``many``: the file for distinct keys, returning those it claimed;
    ``params``: the statements' other parameters. ``writer(window_seconds)``
    is the :data:`TextWriter` of the bodies, exactly as the queue's
    ``encode`` writes them (:func:`json_writer` for the stock ``encode``,
    :func:`encoding_writer` for one of the queue's own). ``trail_many``: the
    file for many items with trailing runs, returning each item's outcome
    and the token carrying it, or ``None`` (such items go one by one)."""

    one: str
    many: str
    params: Mapping[str, Any]
    writer: Callable[[float], TextWriter]
    trail_many: str | None = None

    def one_params(self, key: str, token: str, body: str, window_seconds: float) -> dict[str, Any]:
        """The parameters of :attr:`one`."""
        return {
            **self.params,
            "key": key,
            "seconds": float(window_seconds),
            "token": token,
            "body": body,
        }

    def many_params(
        self, keys: list[str], tokens: list[str], bodies: list[str], window_seconds: float
    ) -> dict[str, Any]:
        """The parameters of :attr:`many`."""
        seconds = float(window_seconds)
        return {**self.params, "keys": keys, "tokens": tokens, "bodies": bodies, "seconds": seconds}


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
    ``max_delay_seconds`` / ``max_send_delay_seconds``
        Longest retry delay, and send delay (900 s on SQS), the engine accepts.
    ``max_body_bytes``
        Largest encoded JSON body; :meth:`encode` rejects bigger ones
        before anything is sent.
    ``transactional``
        ``send`` joins the caller's database transaction (only a queue
        living in the claims database can): ``enqueue_claimed`` may then run
        inside ``transaction.atomic()``, and claim and message commit
        together.
    ``supports_lease_extension``
        :meth:`extend_leases` can push back the end of a received message's
        lease, so a worker keeps the messages of a long batch (or one long
        task) to itself however long they run. Without it, the lease a
        receive grants must outlast the whole batch.
    ``records_runs``
        :meth:`settle` writes the messages' ``run`` too (else the worker does).

    Options: :attr:`option_spec` declares ``OPTIONS``, name to
    :class:`~.options.Option` (parser with its bounds, default, whether
    secret, check id), checked once on creation by
    :func:`~.options.parse_options` and :meth:`check_options`: the clean
    values land in :attr:`config`, the problems in :meth:`check`, and
    :meth:`ensure_configured` raises ``ImproperlyConfigured`` naming the
    queue and each bad option.
    """

    max_batch_size: ClassVar[int] = 100
    max_delay_seconds: ClassVar[int] = MAX_DELAY_SECONDS
    max_send_delay_seconds: int = MAX_DELAY_SECONDS
    max_body_bytes: ClassVar[int] = 128 * 1024
    transactional: bool = False
    supports_lease_extension: ClassVar[bool] = False
    records_runs: ClassVar[bool] = False

    #: The backend's options, name to :class:`~.options.Option`; ``None``
    #: (the default) leaves ``OPTIONS`` unchecked, to the backend.
    option_spec: ClassVar[Mapping[str, Option] | None] = None

    def __init__(self, alias: str, *, options: Mapping[str, Any] | None = None) -> None:
        self.alias = alias
        self.options: dict[str, Any] = dict(options or {})
        for name, option in (self.option_spec or {}).items():
            if option.secret and isinstance(self.options.get(name), str):
                # Keep the raw credential out of ``self.options``, where it could be dumped.
                self.options[name] = Secret(self.options[name])
        #: The clean options: every option of :attr:`option_spec`, defaults filled in.
        self.config: dict[str, Any] = {}
        problems: list[Problem] = []
        if self.option_spec is not None:
            self.config, problems = parse_options(alias, self.options, self.option_spec)
            problems += self.check_options(self.config)
        self._option_messages = [problem.message(self.owner) for problem in problems]

    @property
    def owner(self) -> str:
        """How messages name this queue's options."""
        return f"TASKCLAIM_QUEUES[{self.alias!r}]['OPTIONS']"

    def check_options(self, config: dict[str, Any]) -> list[Problem]:
        """Problems across options (or with the rest of the settings) of
        the clean ``config``; called once, on creation. None by default."""
        return []

    def ensure_configured(self) -> dict[str, Any]:
        """:attr:`config`, or ``ImproperlyConfigured`` naming the queue and
        each of its :meth:`configuration_errors`: what a use of a
        misconfigured queue raises."""
        raise_misconfigured(f"queue {self.alias!r}", self.configuration_errors())
        return self.config

    def check_batch(self, bodies: Any) -> None:
        """``TypeError`` unless ``bodies`` (of :meth:`send_many`) is a
        sequence, ``ValueError`` if it holds over :attr:`max_batch_size`."""
        if isinstance(bodies, str | bytes) or not hasattr(bodies, "__len__"):
            raise TypeError(
                f"queue {self.alias!r}: send_many needs a sequence of bodies, got {bodies!r:.80}"
            )
        if len(bodies) > self.max_batch_size:
            raise ValueError(
                f"queue {self.alias!r}: {len(bodies)} bodies, over the batch limit of "
                f"{self.max_batch_size}"
            )

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

    def claimed_insert(self, alias: str) -> ClaimedInsert | None:
        """How this queue inserts its messages in the statement that claims
        their keys on database ``alias`` (the PostgreSQL queue, an outbox),
        or ``None`` (the default): the claim is written first and
        :meth:`send` called after it. A subclass that changes :meth:`encode`
        changes the answer's ``writer`` too (:func:`encoding_writer`)."""
        return None

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

    def lease_seconds(self) -> float | None:
        """Seconds a :meth:`receive` leases its messages for (``None``: unknown)."""
        return None

    def extend_leases(
        self, messages: Sequence[ReceivedMessage], *, seconds: float
    ) -> list[ReceivedMessage]:
        """Makes the leases of ``messages`` (received from this backend)
        run ``seconds`` from now; returns those still leased under the
        receipt they came with. A message whose lease ran out and was taken
        by another delivery is left alone and not returned: its current
        consumer owns it. Only where ``supports_lease_extension`` is true;
        ``NotImplementedError`` elsewhere."""
        raise NotImplementedError(f"queue {self.alias!r} cannot extend leases")

    def check(self) -> list[checks.CheckMessage]:
        """System-check messages about this queue's configuration: those of
        its options (see :attr:`option_spec`)."""
        return list(self._option_messages)

    def status(self) -> QueueStatus:
        """Message counts as far as the engine exposes them (``manage.py
        taskclaim_status``, metrics); the default knows nothing."""
        return QueueStatus()

    def configuration_errors(self) -> tuple[checks.CheckMessage, ...]:
        """The serious messages of :meth:`check` (``ImproperlyConfigured`` in
        ``enqueue_claimed``), kept from the first call; override it if options change."""
        errors: tuple[checks.CheckMessage, ...] | None = self.__dict__.get("_configuration_errors")
        if errors is None:
            errors = tuple(message for message in self.check() if message.is_serious())
            self._configuration_errors = errors
        return errors

    def _log_stale_settlements(self, stale: int, *, advice: str = "") -> None:
        """Warns (``queue.settle_stale``) of ``stale`` settlements skipped (leases ran out)."""
        logger.warning(
            "%s: %d settlements skipped: their lease ran out and the messages were "
            "delivered again%s",
            *(printable(self.alias), stale, f"; {advice}" if advice else ""),
            extra={"event": "queue.settle_stale", "queue": self.alias, "stale": stale},
        )

    def close(self) -> None:  # noqa: B027  (optional hook)
        """Releases connections; the queue may be used again afterwards."""


def json_writer(queue: BaseQueue, window_seconds: float) -> TextWriter:
    """The :data:`TextWriter` of ``queue``'s bodies of ``window_seconds``
    for the stock :meth:`BaseQueue.encode`: each put together from the
    task's JSON already made (much faster for many tasks), its size checked
    as ``encode`` checks it."""
    write = body_writer(window_seconds)
    check_size = queue.check_body_size

    def fast(key: str, token: str, task: Any, task_json: str) -> str:
        body = write(key, token, task_json)
        check_size(len(body) if body.isascii() else len(body.encode("utf-8")))
        return body

    return fast


def encoding_writer(queue: BaseQueue, window_seconds: float) -> TextWriter:
    """The :data:`TextWriter` of ``queue``'s bodies of ``window_seconds``
    through its own :meth:`~BaseQueue.encode`, for a queue that changes it."""

    def encode(key: str, token: str, task: Any, task_json: str) -> str:
        return queue.encode(message_body(key, token, window_seconds, task)).decode("utf-8")

    return encode


def writer_of(queue: BaseQueue) -> Callable[[float], TextWriter]:
    """The ``writer`` of ``queue``'s :class:`ClaimedInsert`: :func:`json_writer`
    for the stock :meth:`~BaseQueue.encode`, else :func:`encoding_writer`."""
    write = json_writer if type(queue).encode is BaseQueue.encode else encoding_writer
    return functools.partial(write, queue)
