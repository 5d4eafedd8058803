"""What counts as a task's failure, and the failures the consumer raises itself.

A run is a call the worker makes, so whatever it raises is the task's doing
and one failed attempt, retried or given up like any other error:
``SystemExit`` (``sys.exit()``, ``exit()``), a ``KeyboardInterrupt`` the task
raised, ``asyncio.CancelledError`` out of an async task (the worker never
cancels a run), even ``GeneratorExit`` (a run is no generator the worker
closes). Only the worker's own shutdown stops a worker, and it raises
nothing: its first signal sets a flag, its second ends the process. The one
exception is a ``KeyboardInterrupt`` in the main thread while SIGINT has
Python's default handler (``consume_claimed()`` called from a script, with
no worker's handlers installed): that may be a real Ctrl-C, so it propagates.

:class:`DeliveriesExhausted` is the failure of a message delivered more
times than its task has attempts without ever being settled: each earlier
delivery ended its worker (``os._exit()``, SIGKILL, out of memory, a
segfault). It is given up without running again. :class:`TimeLimitExceeded`
is the failure of a run that went on past its time limit
(:mod:`~astral_taskclaim.consumer.time_limits`).
"""

from __future__ import annotations

import signal
import threading

from django.db import connections

from astral_taskclaim.core.logtext import printable

__all__ = [
    "DeliveriesExhausted",
    "TaskNotFound",
    "TimeLimitExceeded",
    "describe_error",
    "is_task_failure",
]

#: Longest error text kept with a queued message.
_MAX_ERROR_CHARS = 2000


class DeliveriesExhausted(Exception):
    """A message delivered ``attempts`` times, past ``max_retries + 1``,
    none of them settled: given up without running it again."""

    def __init__(self, attempts: int, max_retries: int) -> None:
        super().__init__(
            f"delivered {attempts} times, more than the {max_retries + 1} attempts of "
            f"max_retries={max_retries}, without being settled (each earlier delivery "
            "ended its worker process); given up without running it again"
        )
        self.attempts = attempts
        self.max_retries = max_retries


class TimeLimitExceeded(Exception):
    """A run that went on past its time limit of ``seconds``: an ``async
    def`` task was cancelled; a sync one (``hung``) was left running on its
    thread, which Python cannot stop, and its worker exits for a restart.
    Either way a failed attempt, retried or given up as any other."""

    def __init__(self, seconds: float, *, hung: bool) -> None:
        then = "left running (a thread cannot be stopped)" if hung else "cancelled"
        super().__init__(f"the run took longer than its time limit of {seconds:g} s; {then}")
        self.seconds = seconds
        self.hung = hung


class TransactionLeftOpen(Exception):
    """A run that returned with its database connection out of autocommit
    (``transaction.set_autocommit(False)`` and no commit): the open
    transaction was rolled back, the run's writes with it, so the attempt
    failed."""

    def __init__(self, alias: str) -> None:
        super().__init__(
            f"the task left database connection {alias!r} in a transaction (autocommit "
            "off, not committed); it was rolled back"
        )


def roll_back_left_open(alias: str) -> bool:
    """Rolls back and ends a transaction a run left open on this thread's
    connection to database ``alias`` (out of autocommit, outside
    ``atomic()``); whether there was one. The claim writes and settlements
    that follow on that connection would otherwise join the task's
    transaction and be lost with it. A connection in an atomic block (a
    ``TestCase``'s) is left alone; others are Django's to close between
    batches, as between requests."""
    connection = connections[alias]
    if connection.connection is None or connection.in_atomic_block:
        return False
    if connection.get_autocommit():
        return False
    connection.rollback()
    connection.set_autocommit(True)
    return True


class TaskNotFound(LookupError):
    """A message's task is not one this worker can run (yet): not
    registered, or its module does not import."""


def is_task_failure(error: BaseException) -> bool:
    """Whether ``error``, raised by a task's ``parse`` or ``run``, is its
    failed attempt (see the module docstring); ``False`` only for what may
    be the user's Ctrl-C, which must propagate."""
    if isinstance(error, Exception) or not isinstance(error, KeyboardInterrupt):
        return True
    return not (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )


def describe_error(error: BaseException) -> str:
    """``ExceptionClass: message``, cut to ``_MAX_ERROR_CHARS`` (2000), for
    a message's ``last_error`` and the log. Total: an exception whose
    ``__str__`` raises (even ``SystemExit``) is described by its class, and
    characters PostgreSQL text cannot hold (NUL, lone surrogates) or a log
    line should not (controls) are written as escapes, so one odd exception
    can neither end the worker nor fail its batch's settlement."""
    kind = type(error).__qualname__
    try:
        message = str(error)
    except BaseException:  # any failure of the task's own __str__, SystemExit too
        message = "<message not printable>"
    text = f"{kind}: {printable(message)}" if message else kind
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 1] + "…"
