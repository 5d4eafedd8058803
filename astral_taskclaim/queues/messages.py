"""What a queue's ``receive`` returns and its ``settle`` applies.

A backend's :meth:`~astral_taskclaim.queues.base.BaseQueue.receive` returns a
:class:`MessageBatch` of :class:`ReceivedMessage`; the consumer records its
decision on each message (``ack()``, ``retry()``, ``hand_back()``) and the
worker hands the batch to :meth:`~astral_taskclaim.queues.base.BaseQueue.settle`,
which applies them all at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from astral_taskclaim.queues.options import delay_seconds as check_delay_seconds
from astral_taskclaim.queues.runs import RunRecord

__all__ = ["MAX_DELAY_SECONDS", "MessageBatch", "ReceivedMessage", "Settlement"]

#: Cloudflare Queues' longest retry delay, which every backend honours.
MAX_DELAY_SECONDS = 43_200

#: How a consumer settled a message (:attr:`ReceivedMessage.settlement`).
Settlement = Literal["ack", "retry"]


@dataclass(eq=False)
class ReceivedMessage:
    """One delivered message, as ``consume_claimed`` settles it: ``attempts``
    counts deliveries, this one included (1 on the first); ``ack()``,
    ``retry()`` and ``hand_back()`` only record the decision, which the
    backend applies in :meth:`~astral_taskclaim.queues.base.BaseQueue.settle`;
    ``receipt`` is the backend's handle (lease id, receipt handle, row id)."""

    body: Any
    attempts: int
    receipt: Any
    id: str = ""
    #: Its previous delivery ran out of its lease unsettled (its worker died,
    #: perhaps at this message's hands), where the queue can tell (PostgreSQL).
    unsettled_before: bool = False
    settlement: Settlement | None = field(default=None, init=False)
    delay_seconds: float = field(default=0, init=False)
    #: ``ExceptionClass: message`` of the failed run a retry follows, which a
    #: queue that can store it (PostgreSQL) keeps with the message.
    last_error: str | None = field(default=None, init=False)
    #: The claimed task's run it carried, for the history (:mod:`.runs`).
    run: RunRecord | None = field(default=None, init=False)
    handed_back: bool = field(default=False, init=False)
    #: ``time.monotonic()`` once a trailing run's claim was made: its key
    #: is held a window from no later than that (:mod:`..worker.leases`).
    claimed_at: float | None = field(default=None, init=False)

    def ack(self) -> None:
        """Done with the message: the queue deletes it."""
        self.settlement = "ack"

    def retry(self, *, delay_seconds: float = 0) -> None:
        """Deliver the message again after ``delay_seconds``."""
        self.delay_seconds = check_delay_seconds(delay_seconds, MAX_DELAY_SECONDS)
        self.settlement = "retry"

    def hand_back(self) -> None:
        """Deliver again at once, unrun: not an attempt where the queue can tell (PostgreSQL)."""
        self.retry(delay_seconds=0)
        self.handed_back = True


@dataclass
class MessageBatch:
    """A received batch: the queue's alias and its messages, in order."""

    queue: str
    messages: list[ReceivedMessage]
