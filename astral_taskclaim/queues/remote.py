"""What the remote backends (Cloudflare, SQS) share: their base class
:class:`RemoteQueue`, its transactional outbox, splitting batches to the
service's limits, and keeping credentials out of sight. Their ``OPTIONS``
are checked as every backend's, against their ``option_spec`` (see
:mod:`.options`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.redaction import redact
from astral_taskclaim.queues import options as opts
from astral_taskclaim.queues import outbox
from astral_taskclaim.queues.base import (
    BaseQueue,
    ClaimedInsert,
    PartlySentError,
    QueueError,
    writer_of,
)
from astral_taskclaim.queues.options import Problem, Secret

__all__ = ["EntriesRefusedError", "RemoteQueue", "RequestRefusedError", "chunks"]


class RequestRefusedError(QueueError):
    """The service refused a whole send request for what its bodies hold
    (one too big for the queue, one it cannot read), not for a passing
    condition: the same bodies would be refused again. It does not say
    which body is at fault; nothing of the request was sent."""


class EntriesRefusedError(PartlySentError):
    """The service took a batch request but refused some of its entries,
    each with its reason: ``refused`` maps the positions of those refused
    for good (the sender's fault) to the reason, ``failed`` those refused
    for a passing fault on the service's side. ``unsent`` holds both, and
    the bodies of requests not made after it."""

    def __init__(
        self,
        message: str,
        *,
        unsent: Sequence[int],
        refused: Mapping[int, str],
        failed: Mapping[int, str],
    ) -> None:
        super().__init__(message, unsent=unsent)
        self.refused = dict(refused)
        self.failed = dict(failed)


def chunks(
    items: Sequence[bytes], count: int, size: int, *, overhead: int = 0
) -> Iterator[list[bytes]]:
    """``items`` in order, in runs of at most ``count`` items and ``size``
    bytes, each item counting ``overhead`` bytes more than its length (the
    service's metadata per message); an item bigger than ``size`` goes
    alone."""
    chunk: list[bytes] = []
    total = 0
    for item in items:
        weight = len(item) + overhead
        if chunk and (len(chunk) == count or total + weight > size):
            yield chunk
            chunk, total = [], 0
        chunk.append(item)
        total += weight
    if chunk:
        yield chunk


class RemoteQueue(BaseQueue):
    """Base of the backends on a remote service: credentials kept as
    :class:`~.options.Secret` and redacted from what they log and raise, and
    a client opened on first use that :meth:`close` closes.

    With ``outbox`` on, ``send``/``send_many`` write rows to the outbox
    (:mod:`.outbox`) in the claims database instead of calling the service,
    the queue is ``transactional``, and the relay sends the rows with
    :meth:`deliver`.
    """

    def __init__(self, alias: str, *, options: dict[str, Any] | None = None) -> None:
        super().__init__(alias, options=options)
        self._client: Any = None
        #: Whether sends go to the outbox, in the claims database.
        self.outbox = self.config.get("outbox") is True
        if self.outbox:
            self.transactional = True
            self.database = app_settings.DATABASE
            # The relay holds a row back as long as asked, past the service's limit.
            self.max_send_delay_seconds = self.max_delay_seconds

    def claimed_insert(self, alias: str) -> ClaimedInsert | None:
        """With an outbox in database ``alias``, the statements writing
        claims and outbox rows together, bodies as :meth:`encode` writes
        them (:func:`~astral_taskclaim.queues.base.encoding_writer` where a
        subclass changes it); else ``None``."""
        if not self.outbox or alias != self.database:
            return None
        return outbox.claimed_insert(self.alias, writer_of(self))

    def send(self, body: Any, *, delay_seconds: float = 0) -> None:
        """Sends ``body`` after ``delay_seconds``; with an outbox, writes it
        to the outbox in the caller's transaction, and the relay sends it
        once the delay has passed."""
        if not self.outbox:
            self.deliver_one(body, delay_seconds=delay_seconds)
            return
        delay = opts.delay_seconds(delay_seconds, self.max_delay_seconds)
        encoded = self.encode(body)
        self.ensure_configured()
        outbox.insert(self.database, self.alias, [encoded], delay_seconds=delay)

    def send_many(self, bodies: Sequence[Any]) -> None:
        """Sends at most :attr:`max_batch_size` ``bodies``, every one
        checked first, with :meth:`deliver`; with an outbox, writes them to
        the outbox in the caller's transaction, all or none."""
        self.check_batch(bodies)
        encoded = [self.encode(body) for body in bodies]
        if self.outbox:
            self.ensure_configured()
            outbox.insert(self.database, self.alias, encoded)
        else:
            self.deliver(encoded)

    @abstractmethod
    def deliver_one(self, body: Any, *, delay_seconds: float = 0) -> None:
        """Sends one ``body`` to the service now, after ``delay_seconds``."""

    @abstractmethod
    def deliver(self, encoded: Sequence[bytes]) -> None:
        """Sends bodies :meth:`encode` produced to the service now, in as
        few requests as its limits allow, in order. When a request fails
        after others went through, :class:`~.base.PartlySentError` names
        the bodies not sent (:class:`EntriesRefusedError`, with the
        service's reason for each); any other error means none was
        (:class:`RequestRefusedError`: and never will be, as they are)."""

    def check_options(self, config: dict[str, Any]) -> list[Problem]:
        """E015 for an outbox the claims database cannot hold."""
        problem = outbox.database_problem() if config.get("outbox") is True else None
        return [Problem("E015", problem, "outbox")] if problem else []

    def credentials(self) -> list[str]:
        """The values of this queue's secret options, for redaction only."""
        return [
            value.reveal()
            for name, option in (self.option_spec or {}).items()
            if option.secret and isinstance(value := self.options.get(name), Secret)
        ]

    def redact(self, text: str) -> str:
        """``text`` with every representation of this queue's credentials
        redacted: apply it to whatever reaches a log record or an error."""
        return redact(text, self.credentials())

    def close(self) -> None:
        """Closes the client's connections; the next call opens new ones."""
        if self._client is not None:
            self._client.close()
            self._client = None
