"""Signals sent while claimed tasks run, for metrics, tracing or alerts.

Each is sent from one place, the per-message core
:meth:`~astral_taskclaim.consumer.consume.Consumer.consume_one` (and so by
:func:`~astral_taskclaim.consumer.consume.consume_claimed`, the worker, the
``consume_claimed`` command and the Django Tasks backend's runner), with the
queue's name as ``sender`` and these keyword arguments:

- ``key``: the task key; ``claim``: the claim token of the message;
  ``attempts``: deliveries so far, this one included; ``task``: the parsed
  task, as ``run`` receives it.

=====================  ==============================================================
Signal                 Sent when, and its extra arguments
=====================  ==============================================================
``task_started``       ``run(task)`` is about to be called.
``task_finished``      ``run`` returned; the message is acked.
``task_retried``       ``run`` raised and a retry is due: ``error``, ``delay_seconds``.
``task_gave_up``       ``run`` raised for the last time; the claim is released:
                       ``error``.
=====================  ==============================================================

Django matches a receiver's ``sender`` by identity, not equality, and a
worker's queue name is a string of its own (read from its command line), so
connect with :func:`queue_sender`: ``@receiver(task_gave_up,
sender=queue_sender("refresh"))``. The ``sender`` a receiver gets is that
same string, equal to the queue's name.

A malformed body or an unparseable task sends none. Receivers run in the
consuming thread, before the claim is written and the message settled. A
receiver that raises does not change what happens to the
task: its error is logged on the ``astral_taskclaim.signals`` logger
(``queue.signal_receiver_failed``) and the other receivers still run.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from django.dispatch import Signal

from astral_taskclaim.core.envelope import Envelope

__all__ = ["queue_sender", "task_finished", "task_gave_up", "task_retried", "task_started"]

logger = logging.getLogger(__name__)

task_started = Signal()
task_finished = Signal()
task_retried = Signal()
task_gave_up = Signal()


def queue_sender(queue: str) -> str:
    """The ``sender`` the signals of queue ``queue`` (its name) are sent
    with: one string object per name in a process, so a receiver connected
    with ``sender=queue_sender(name)`` matches, however the worker came by
    the name."""
    return sys.intern(queue)


def send(
    signal: Signal, queue: str, found: Envelope, attempts: int, task: Any, **more: Any
) -> None:
    """Sends ``signal`` from ``queue`` for the run of ``task`` (the body
    ``found``, delivery ``attempts``), with ``more`` arguments; a receiver's
    error is logged, and never decides the task's fate."""
    # The test Signal.send starts with (has_listeners() would resolve the
    # receivers): most workers have none, and build no arguments then.
    if not signal.receivers:
        return
    arguments = {"key": found.key, "claim": found.claim, "attempts": attempts, "task": task}
    for receiver, response in signal.send_robust(queue_sender(queue), **arguments, **more):
        if isinstance(response, Exception):
            logger.error(
                "%s task %s: signal receiver %r failed",
                *(queue, arguments["key"], receiver),
                exc_info=response,
                extra={
                    "event": "queue.signal_receiver_failed",
                    "queue": queue,
                    "key": arguments["key"],
                },
            )
