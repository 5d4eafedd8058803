"""Internal: messages whose last delivery ran out unsettled, run alone.

A worker that dies (a task's ``os._exit()``, SIGKILL, out of memory) leaves
every message it had leased unsettled, and each comes back counted one more
delivery, run or not. The PostgreSQL queue says which messages came back so
(:attr:`~astral_taskclaim.queues.ReceivedMessage.unsettled_before`): such a
*suspect* may be what killed its worker. Both loops run a suspect alone,
nothing else of the queue in flight beside it, after handing the rest of
its batch back unrun (their delivery not counted; other suspects stay
suspects, each to run alone in turn), so a task that kills its worker uses
up its own attempts, never its batch-mates'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from astral_taskclaim.consumer.summary import ConsumeSummary
from astral_taskclaim.queues import MessageBatch, ReceivedMessage

if TYPE_CHECKING:
    from astral_taskclaim.worker.protocol import Worker

__all__ = ["hand_back_now", "suspect_of"]


def suspect_of(messages: list[ReceivedMessage]) -> ReceivedMessage | None:
    """The suspect of ``messages`` to run next: the most delivered (the
    first of equals), or ``None`` when none is one."""
    suspects = [m for m in messages if m.unsettled_before]
    return max(suspects, key=lambda m: m.attempts) if suspects else None


def hand_back_now(worker: Worker, queue: str, messages: list[ReceivedMessage]) -> None:
    """Hands ``messages`` (received, none started) back unrun and settles
    them at once, counted as returned."""
    if not messages:
        return
    for message in messages:
        message.hand_back()
    summary = ConsumeSummary(queue=queue, returned=len(messages))
    worker._finish_batch(MessageBatch(queue, messages), summary, messages)
