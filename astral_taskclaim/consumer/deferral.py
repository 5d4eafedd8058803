"""Internal: a message sent again for later instead of run now.

:func:`send_again` sends a message's body again, some seconds ahead, and
acks this delivery: the new message starts its delivery count afresh, on
every queue (SQS and Cloudflare count each receive and cannot take one
back). A Django Task not yet due uses it, and so does :func:`wait_for_task`,
the one way a message whose task this worker does not know is handled, for
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

import functools
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from astral_taskclaim.consumer.retry import scaled_delay
from astral_taskclaim.consumer.summary import (
    ConsumeSummary,
    FailureHook,
    Message,
    Outcome,
    TaskOptions,
)
from astral_taskclaim.core.envelope import WAITING_FIELD, Envelope
from astral_taskclaim.core.logtext import printable
from astral_taskclaim.queues import queues
from astral_taskclaim.queues.runs import RunNote

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


def nameable(name: object) -> bool:
    """Whether a claimed task can be named ``name``: a non-empty ``str``
    without NUL (which no run history could store)."""
    return isinstance(name, str) and name != "" and "\x00" not in name


def unknown_task(
    consumer: Any,
    message: Message,
    found: Envelope,
    summary: ConsumeSummary,
    named: object,
) -> TaskOptions | Outcome:
    """:func:`wait_for_task` for a message naming task ``named`` (``None``:
    none) that ``consumer``'s queue does not have; a give-up is noted in the
    run history as a run of the task it names, so it is seen."""
    what = "names no task and it has no default" if named is None else f"has no task {named!r}"
    error = LookupError(f"queue {consumer.queue!r} {what} (its tasks: {consumer.name})")
    mode, task = consumer.history, named if isinstance(named, str) else ""
    note = None if mode == "none" else RunNote(task, failures_only=mode == "failures")
    known = named is None or nameable(named)
    scale = consumer.scale
    hold = functools.partial(consumer.write_claim, summary.queue, found, summary, False)
    return wait_for_task(
        message, found, summary, error, scale=scale, hold=hold, history=note, nameable=known
    )


def wait_for_task(
    message: Message,
    found: Envelope,
    summary: ConsumeSummary,
    error: LookupError,
    *,
    scale: float,
    hold: Callable[[float], object],
    on_failure: FailureHook | None = None,
    history: RunNote | None = None,
    nameable: bool = True,
) -> TaskOptions | Outcome:
    """A message whose task this worker does not have (see the module
    docstring): sent again, its claim held by ``hold(seconds)``, or the
    options that give it up as a failed last attempt, recording ``error``.
    ``on_failure`` gets ``error`` and whether it is given up, each time;
    ``nameable``: ``False`` gives it up at once."""
    queue, now = summary.queue, time.time()
    since = _waiting_since(message.body, now)
    waited = now - since
    body = {**message.body, WAITING_FIELD: round(since * 1000)}
    unsendable = _unsendable(queue, body) if nameable else None
    extra = {
        "event": "queue.task_unknown",
        "queue": queue,
        "key": found.key,
        "error": str(error),
        "waited_seconds": round(waited, 3),
    }
    shown = (printable(queue), printable(found.key), printable(error))
    if not nameable or waited >= _PATIENCE_SECONDS or unsendable:
        why = f"waited {waited:.0f} s" if nameable else "no task can have that name"
        why = f"it cannot be sent again: {unsendable}" if unsendable else why
        logger.error("%s task %s: %s; given up (%s)", *shown, why, extra=extra)

        def refuse(task: Any) -> None:
            raise error

        # Its last attempt, and not one past its attempts (which would be
        # given up as DeliveriesExhausted, without this error).
        last = max(message.attempts - 1, 0)
        return TaskOptions(_always, refuse, last, None, on_failure, history=history)
    wait = scaled_delay(round(min(max(waited, _FIRST_WAIT), _LONGEST_WAIT)), scale)
    if on_failure is not None:
        on_failure(error, False)
    hold(wait)
    send_again(queue, message, wait, body)
    logger.warning(
        "%s task %s: %s; waiting %s s more for a worker that has it", *shown, wait, extra=extra
    )
    summary.retried += 1
    summary.unknown_task += 1
    summary.retry_delays.append(wait)
    return "retried"


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
