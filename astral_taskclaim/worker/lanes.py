"""Internal: threads that run a worker's messages side by side, one key at a time.

:class:`Lanes` is a pool of ``size`` threads fed from one backlog. An item
put with a key that is running (or waiting) already waits behind it, so two
messages of one key never run at once in a process, whichever batches they
came in. Each thread has its own database connections (Django's are per
thread), closed when the pool closes.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from django.db import connections

__all__ = ["Lanes"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: How often a caller waiting for room looks at its stop flag again.
POLL_SECONDS = 0.2


class Lanes(Generic[T]):
    """Runs ``run(item)`` for each item :meth:`put`, on ``size`` threads
    named ``name``; ``run`` must not raise (what it raises is logged)."""

    def __init__(self, size: int, run: Callable[[T], object], *, name: str) -> None:
        self.size = size
        self._run = run
        self._condition = threading.Condition()
        self._ready: deque[tuple[str | None, T]] = deque()
        #: Items waiting for their key's running (or ready) item to end.
        self._blocked: dict[str, deque[T]] = {}
        self._blocked_count = 0
        #: Keys with an item ready or running.
        self._busy: set[str] = set()
        self._closing = False
        self._threads = [
            threading.Thread(target=self._lane, name=f"{name}-{n}", daemon=True)
            for n in range(1, size + 1)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def backlog(self) -> int:
        """Items put and not started."""
        with self._condition:
            return len(self._ready) + self._blocked_count

    def put(self, key: str | None, item: T) -> None:
        """Queues ``item``; behind the item of ``key`` under way, if any
        (``None``: no key, never waits)."""
        with self._condition:
            if key is not None and key in self._busy:
                self._blocked.setdefault(key, deque()).append(item)
                self._blocked_count += 1
                return
            if key is not None:
                self._busy.add(key)
            self._ready.append((key, item))
            self._condition.notify()

    def wait_for_room(self, backlog: int, stop: Callable[[], bool]) -> None:
        """Returns once at most ``backlog`` items wait, or ``stop()`` is true."""
        with self._condition:
            while len(self._ready) + self._blocked_count > backlog and not stop():
                self._condition.wait(POLL_SECONDS)

    def take_unstarted(self) -> list[T]:
        """Removes every item not started yet and returns them."""
        with self._condition:
            taken = [item for _, item in self._ready]
            for key, _ in self._ready:
                if key is not None:
                    self._busy.discard(key)
            for waiting in self._blocked.values():
                taken.extend(waiting)
            self._ready.clear()
            self._blocked.clear()
            self._blocked_count = 0
            self._condition.notify_all()
            return taken

    def close(self) -> None:
        """Lets the started items end, then stops the threads (items not
        started are dropped: take them first)."""
        with self._condition:
            self._closing = True
            self._condition.notify_all()
        for thread in self._threads:
            thread.join()

    def _lane(self) -> None:
        try:
            while (job := self._next()) is not None:
                key, item = job
                try:
                    self._run(item)
                except BaseException:  # a lane must go on: the item's owner settles it
                    logger.exception("a lane's item raised", extra={"event": "worker.lane_failed"})
                finally:
                    self._done(key)
        finally:
            connections.close_all()

    def _next(self) -> tuple[str | None, T] | None:
        with self._condition:
            while not self._ready:
                if self._closing:
                    return None
                self._condition.wait()
            job = self._ready.popleft()
            self._condition.notify_all()  # room for a waiting producer
            return job

    def _done(self, key: str | None) -> None:
        if key is None:
            return
        with self._condition:
            waiting = self._blocked.get(key)
            if waiting:
                self._ready.append((key, waiting.popleft()))
                self._blocked_count -= 1
                if not waiting:
                    del self._blocked[key]
                self._condition.notify()
            else:
                self._busy.discard(key)
