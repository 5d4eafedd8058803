"""Internal: how the package's long-running loops (the worker, the relay)
stop and wait: a two-stage shutdown, and one backoff after passing faults.

The first SIGTERM or SIGINT asks the loop to stop after the work in hand
(:attr:`TwoStageStop.requested` becomes true and :meth:`TwoStageStop.wait`
returns at once); a second exits the process at once with status
128 + signal, for an operator who will not wait. Logs ``<kind>.stopping``
and ``<kind>.forced_exit`` events.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

import psycopg
from django.db import DatabaseError as DjangoDatabaseError

logger = logging.getLogger(__name__)

_SIGNALS = (signal.SIGTERM, signal.SIGINT)

#: The database's errors after which a loop reconnects and tries again.
DATABASE_ERRORS: tuple[type[Exception], ...] = (DjangoDatabaseError, psycopg.Error)


class Backoff:
    """The wait before the next try after a passing fault: ``first``
    seconds, doubling with each fault in a row up to ``most``."""

    def __init__(self, first: float, most: float) -> None:
        self.first = first
        self.most = max(most, first)
        self.current = first

    def next(self) -> float:
        """This fault's wait; the next one's is twice as long."""
        delay, self.current = self.current, min(self.current * 2, self.most)
        return delay

    def reset(self) -> None:
        """After a success: the next fault waits ``first`` again."""
        self.current = self.first

    def after(self, faults: int) -> float:
        """The wait after ``faults`` in a row that something counted itself."""
        return min(self.first * 2.0 ** min(faults, 30), self.most)


class TwoStageStop:
    """The stop request of one loop; ``kind`` (``"relay"``, ``"worker"``)
    prefixes its log events, ``name`` says what stops, ``work`` what the
    first signal lets finish, ``queue`` (if any) goes in the events'
    fields. ``exit`` ends the process on the second signal (``os._exit``;
    replaced in tests)."""

    def __init__(
        self,
        kind: str,
        name: str,
        *,
        work: str = "the work in hand",
        queue: str | None = None,
        exit: Callable[[int], object] = os._exit,
    ) -> None:
        self.kind = kind
        self.name = name
        self.work = work
        self._fields = {} if queue is None else {"queue": queue}
        self._exit = exit
        self._event = threading.Event()

    @property
    def requested(self) -> bool:
        """Whether :meth:`request` was called."""
        return self._event.is_set()

    def request(self) -> None:
        """Asks the loop to stop after the work in hand. Safe from a signal
        handler or another thread."""
        self._event.set()

    def wait(self, seconds: float) -> bool:
        """Waits up to ``seconds``, returning early (``True``) when a stop
        is requested."""
        return self._event.wait(seconds)

    def handle_signal(self, signum: int, frame: FrameType | None = None) -> None:
        """First call: :meth:`request`. Second: exit the process at once."""
        signame = signal.Signals(signum).name
        if self._event.is_set():
            logger.warning(
                "%s again: exiting at once",
                signame,
                extra={"event": f"{self.kind}.forced_exit", **self._fields},
            )
            sys.stderr.flush()
            self._exit(128 + signum)
            return
        logger.info(
            "%s: finishing %s, then stopping %s (again to exit at once)",
            *(signame, self.work, self.name),
            extra={"event": f"{self.kind}.stopping", **self._fields},
        )
        self.request()

    @contextmanager
    def signal_handlers(self) -> Iterator[None]:
        """SIGTERM and SIGINT call :meth:`handle_signal` inside the block
        (main thread only)."""
        previous = {sig: signal.signal(sig, self.handle_signal) for sig in _SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
