"""Internal: the consumer's side of trailing runs (see
:mod:`~astral_taskclaim.claims.trailing`).

A follow-up run's message claims its key when delivered and runs the
pending follow-up's task; while another claim holds the key it is sent
again for when that claim ends (not an attempt: no claim of its own is
touched); once superseded (a later send or follow-up took its place) it is
acked unrun; one that can never run (a window or debounce written by hand
as NaN or infinite) is dropped and its message acked as malformed. A
trailing-mode message sent at once holds its key a window from its run's
start, or is superseded (acked unrun) when its claim ran out while it
waited and a later claim holds the key.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from astral_taskclaim.claims.trailing import start_sent, take_follow_up
from astral_taskclaim.consumer.deferral import send_again
from astral_taskclaim.consumer.summary import ConsumeSummary, Entry, Message, Outcome
from astral_taskclaim.core.envelope import FOLLOW_UP_FIELD, Envelope, trailing_run
from astral_taskclaim.core.logtext import printable
from astral_taskclaim.queues.messages import ReceivedMessage

logger = logging.getLogger(__name__)

#: The shortest wait of a follow-up for the claim that holds its key.
_SHORTEST_WAIT = 0.1


def begin(
    consumer: Any,
    message: Message,
    found: Envelope,
    summary: ConsumeSummary,
    entry: Entry | None,
) -> Envelope | Outcome:
    """The envelope to run for ``message`` (a follow-up's, with its task),
    or the outcome once it is settled without a run (by ``consumer``, the
    queue's, as malformed when its follow-up can never run). Before a
    superseded run's message is acked, ``entry``'s ``superseded(alias,
    found)`` hook, if it has one, ends what it recorded of the run."""
    body = message.body
    if not trailing_run(body):  # most messages: two dict lookups, nothing more
        return found
    queue, shown = summary.queue, (printable(summary.queue), printable(found.key))
    extra = {"queue": queue, "key": found.key}
    if body.get(FOLLOW_UP_FIELD) is True:
        taken = take_follow_up(consumer.alias, found)
        if isinstance(taken, Envelope):
            _claimed(message)
            return taken
        if isinstance(taken, str):
            malformed: Outcome = consumer.malformed(message, summary, taken)
            return malformed
        if taken is not None:
            wait = max(taken, _SHORTEST_WAIT)
            send_again(queue, message, wait)
            logger.debug(
                "%s task %s: follow-up waits %.1f s for the claim holding its key",
                *shown,
                wait,
                extra={"event": "queue.follow_up_waiting", **extra},
            )
            summary.retried += 1
            summary.follow_up_waits += 1
            summary.retry_delays.append(wait)
            return "retried"
    elif start_sent(consumer.alias, found):
        _claimed(message)
        return found
    logger.debug(
        "%s task %s: superseded by a later claim of its key; acked unrun",
        *shown,
        extra={"event": "queue.follow_up_superseded", **extra},
    )
    if (superseded := getattr(entry, "superseded", None)) is not None:
        superseded(consumer.alias, found)
    message.ack()
    summary.superseded += 1
    return "superseded"


def _claimed(message: Message) -> None:
    """Notes when the run's claim was made: its window starts no later."""
    if isinstance(message, ReceivedMessage):
        message.claimed_at = time.monotonic()
