"""Internal: a message sent again for later instead of run now.

:func:`send_again` sends a message's body again, some seconds ahead, and
acks this delivery: the new message starts its delivery count afresh, on
every queue (SQS and Cloudflare count each receive and cannot take one
back). A Django Task not yet due uses it, and so does :class:`UnknownTask`,
the one consumer of a message whose task this worker does not know, for
claimed tasks and Django Tasks alike.

In a rolling deploy, web processes and workers run different code for a
while: a message may name a task only the newer workers have. Such a
message waits for a worker that has it, never using up the task's attempts:

- it is sent again after a wait as long as it has waited so far (30
  seconds at first, at most 15 minutes, times ``TASKCLAIM_DELAY_SCALE``),
  its claim held through the wait; the body notes in
  :data:`~astral_taskclaim.core.envelope.WAITING_FIELD` when a worker
  first found its task unknown;
- an hour (``_PATIENCE_SECONDS``) after that, it is given up as a
  failed last attempt: its claim released, the run history (or the Django
  Task's result) records the error naming the task, and the queue;
- each time it logs ``queue.task_unknown`` (a warning while it waits, an
  error when it is given up) and counts in ``ConsumeSummary.unknown_task``.

A name no task can have (not a string, empty, or holding NUL) is given up
at once: no deploy brings a worker that has it. So is a body the queue
cannot take again (over its size limit once the field is added, or holding
a lone surrogate): its send would stop the worker at every delivery.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any

from astral_taskclaim.consumer.consume import Consumer
from astral_taskclaim.consumer.summary import (
    ConsumeSummary,
    FailureHook,
    Message,
    MessageConsumer,
    Outcome,
    TaskOptions,
)
from astral_taskclaim.core.envelope import WAITING_FIELD, Envelope, parse_body
from astral_taskclaim.core.logtext import printable
from astral_taskclaim.queues import queues

__all__ = ["UnknownTask", "send_again"]

logger = logging.getLogger(__name__)

#: Seconds a message whose task this worker does not know waits for a
#: worker that has it, from the first delivery that found it unknown.
_PATIENCE_SECONDS = 3600.0
_FIRST_WAIT = 30.0
#: SQS's longest send delay: a wait every queue can take in one send.
_LONGEST_WAIT = 900.0


def send_again(queue: str, message: Message, wait: float, body: Any = None) -> None:
    """Sends ``body`` (default: the message's) to queue ``queue`` again,
    ``wait`` seconds ahead (at most the queue's longest send delay), and
    acks this delivery."""
    sender = queues[queue]
    again = message.body if body is None else body
    sender.send(again, delay_seconds=min(wait, sender.max_send_delay_seconds))
    message.ack()


@dataclass(frozen=True)
class UnknownTask(MessageConsumer):
    """Consumes a message whose task this worker does not know (see the
    module docstring). ``error`` names the task and the queue, and is what
    a give-up records; ``consumer`` writes the claim and notes the give-up
    in its history; ``on_failure`` gets ``error`` and whether it is given
    up, each time; ``nameable``: ``False`` gives it up at once."""

    error: LookupError
    consumer: Consumer
    on_failure: FailureHook | None = None
    nameable: bool = True

    def consume_one(self, message: Message, summary: ConsumeSummary) -> Outcome:
        found = parse_body(message.body)
        if found is None:
            return self.consumer.malformed(message, summary, "not a claimed task")
        now = time.time()
        since = _waiting_since(message.body, now)
        waited = now - since
        body = {**message.body, WAITING_FIELD: round(since * 1000)}
        unsendable = _unsendable(summary.queue, body) if self.nameable else None
        if not self.nameable or waited >= _PATIENCE_SECONDS or unsendable:
            return self._give_up(message, summary, found, waited, unsendable)
        wait = min(max(waited, _FIRST_WAIT), _LONGEST_WAIT)
        scale = self.consumer.scale
        wait = wait if scale == 1.0 else round(wait * scale, 3)
        if self.on_failure is not None:
            self.on_failure(self.error, False)
        queue = summary.queue
        self.consumer.write_claim(queue, found, summary, False, wait)
        send_again(queue, message, wait, body)
        logger.warning(
            "%s task %s: %s; waiting %s s more for a worker that has it",
            *(printable(queue), printable(found.key), printable(self.error), wait),
            extra=self._extra(summary, found, waited),
        )
        summary.retried += 1
        summary.unknown_task += 1
        summary.retry_delays.append(wait)
        return "retried"

    def _give_up(
        self,
        message: Message,
        summary: ConsumeSummary,
        found: Envelope,
        waited: float,
        unsendable: str | None = None,
    ) -> Outcome:
        error = self.error

        def refuse(task: Any) -> None:
            raise error

        why = f"waited {waited:.0f} s" if self.nameable else "no task can have that name"
        why = f"it cannot be sent again: {unsendable}" if unsendable else why
        logger.error(
            "%s task %s: %s; given up (%s)",
            *(printable(summary.queue), printable(found.key), printable(error), why),
            extra=self._extra(summary, found, waited),
        )
        # Its last attempt, and not one past its attempts (which would be
        # given up as DeliveriesExhausted, without this error).
        last = max(message.attempts - 1, 0)
        options = TaskOptions(_always, refuse, last, None, self.on_failure)
        return self.consumer.for_task(options).consume_one(message, summary)

    def _extra(self, summary: ConsumeSummary, found: Envelope, waited: float) -> dict[str, Any]:
        return {
            "event": "queue.task_unknown",
            "queue": summary.queue,
            "key": found.key,
            "error": str(self.error),
            "waited_seconds": round(waited, 3),
        }


def _waiting_since(body: Any, now: float) -> float:
    """When a worker first found the body's task unknown (epoch seconds):
    its :data:`WAITING_FIELD`, if a time no later than ``now``, else ``now``."""
    value = body.get(WAITING_FIELD)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return now
    try:
        seconds = value / 1000
    except OverflowError:  # an int past a double's range
        return now
    return min(seconds, now) if math.isfinite(seconds) else now


def _unsendable(queue: str, body: Any) -> str | None:
    """Why ``body`` cannot be sent to ``queue`` (over its size limit with
    the waiting field, a lone surrogate no queue writes), else ``None``:
    raised from the send, it would stop the worker at every delivery."""
    try:
        queues[queue].encode(body)
    except (TypeError, ValueError) as error:
        return str(error)
    return None


def _always(task: Any) -> bool:
    return True  # even a null task reaches refuse()
