"""Internal: threads that run a worker's messages side by side, one key at a time.

:class:`Lanes` runs at most ``size`` items at once, fed from one backlog.
An item put with a key that is in progress (or waiting) already waits
behind it, so two messages of one key never run at once in a process,
whichever batches they came in. An item may also *suspend*: its run
returns ``False`` (it handed an ``async def`` task to the event loop) and
it stays in progress, its key busy, holding no thread, until
:meth:`Lanes.resume` puts it back; a resumed item goes before new ones.
Threads are started as items need them, up to ``size``: a queue of async
tasks runs ``size`` of them on a thread or two. Each thread has its own
database connections (Django's are per thread), closed when the pool closes.
Lanes of ``size`` 1 start no thread: :meth:`Lanes.run_here` runs their
items on the thread that calls it.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from django.db import connections

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: How often a caller waiting for room looks at its stop flag again.
POLL_SECONDS = 0.2


class Lanes(Generic[T]):
    """Runs ``run(item)`` for each item :meth:`put`, at most ``size`` in
    progress, on threads named ``name``; ``run`` returns ``False`` when the
    item suspended (see the module docstring) and must not raise (what it
    raises is logged, and the item counts as done)."""

    def __init__(self, size: int, run: Callable[[T], bool], *, name: str) -> None:
        self.size = size
        self._run = run
        self._name = name
        lock = threading.Lock()
        #: Lanes wait on ``_work``; callers waiting for room on ``_room``.
        self._work = threading.Condition(lock)
        self._room = threading.Condition(lock)
        self._ready: deque[tuple[str | None, T]] = deque()
        self._resumed: deque[tuple[str | None, T]] = deque()
        #: Items waiting for their key's item in progress (or ready) to end.
        self._blocked: dict[str, deque[T]] = {}
        self._blocked_count = 0
        #: Keys with an item ready or in progress.
        self._busy: set[str] = set()
        #: Items started and not done: running on a thread, or suspended.
        self._in_progress = 0
        #: Threads waiting for work that no item has been handed to yet.
        self._idle = 0
        self._threads: list[threading.Thread] = []
        #: A thread is starting: the next starts once it has taken work.
        self._starting = False
        self._closing = False

    @property
    def backlog(self) -> int:
        """Items put and not started."""
        with self._work:
            return len(self._ready) + self._blocked_count

    @property
    def threads(self) -> int:
        """Threads started so far."""
        return len(self._threads)

    @property
    def idle(self) -> int:
        """Threads waiting for work."""
        with self._work:
            return self._idle

    def put(self, key: str | None, item: T) -> None:
        """Queues ``item``; behind the item of ``key`` under way, if any
        (``None``: no key, never waits). Lanes of ``size`` 1 run one item at
        a time, in the order put: no key waits there."""
        if self.size == 1:
            key = None
        with self._work:
            if key is not None and key in self._busy:
                self._blocked.setdefault(key, deque()).append(item)
                self._blocked_count += 1
                return
            if key is not None:
                self._busy.add(key)
            self._ready.append((key, item))
            if self._in_progress < self.size:
                self._wake()

    def resume(self, key: str | None, item: T) -> None:
        """Runs a suspended ``item`` again, before any item not started."""
        with self._work:
            self._resumed.append((key, item))
            # A thread for it even when every thread runs a sync task: a
            # resumed item is in progress, so fewer than ``size`` threads
            # are busy, and it must not wait for a long task to end.
            self._wake()

    def wait_for_room(self, backlog: int, stop: Callable[[], bool]) -> None:
        """Returns once at most ``backlog`` items wait, or ``stop()`` is true."""
        with self._room:
            while len(self._ready) + self._blocked_count > backlog and not stop():
                self._room.wait(POLL_SECONDS)

    def take_unstarted(self) -> list[T]:
        """Removes every item not started yet and returns them."""
        with self._work:
            taken = [item for _, item in self._ready]
            for key, _ in self._ready:
                if key is not None:
                    self._busy.discard(key)
            for waiting in self._blocked.values():
                taken.extend(waiting)
            self._ready.clear()
            self._blocked.clear()
            self._blocked_count = 0
            self._room.notify_all()
            return taken

    def close(self) -> None:
        """Lets the items in progress end, and any not started run, then
        stops the threads (:meth:`take_unstarted` first to keep them from
        running)."""
        with self._work:
            self._closing = True
            self._idle = 0
            self._work.notify_all()
        for thread in self._threads:
            thread.join()

    def _wake(self) -> None:
        """Hands the work just added to an idle thread, else to a new one
        while fewer than ``size`` run (called holding the lock). One thread
        starts at a time, and it starts the next only if work still waits
        when it takes its first: a burst of async items, each on a thread
        for a moment, needs a few threads, not one each."""
        if self._idle:
            self._idle -= 1
            self._work.notify()
        elif not self._starting and len(self._threads) < self.size and self.size > 1:
            self._starting = True
            number = len(self._threads) + 1
            thread = threading.Thread(target=self._lane, name=f"{self._name}-{number}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def run_here(self) -> None:
        """Runs the items on the calling thread (lanes of ``size`` 1) until
        none is left, waiting for a suspended one to be resumed."""
        while (job := self._next(until_idle=True)) is not None:
            self._step(*job)

    def _lane(self) -> None:
        first = True
        try:
            while (job := self._next(first=first)) is not None:
                first = False
                self._step(*job)
        finally:
            connections.close_all()

    def _step(self, key: str | None, item: T) -> None:
        done = True
        try:
            done = self._run(item) is not False
        except BaseException:  # a lane must go on: the item's owner settles it
            logger.exception("a lane's item raised", extra={"event": "worker.lane_failed"})
        finally:
            if done:
                self._done(key)

    def _next(
        self, *, first: bool = False, until_idle: bool = False
    ) -> tuple[str | None, T] | None:
        with self._work:
            if first:
                self._starting = False
            while True:
                if self._resumed:
                    job = self._resumed.popleft()
                elif self._ready and self._in_progress < self.size:
                    self._in_progress += 1
                    self._room.notify_all()  # room for a waiting producer
                    job = self._ready.popleft()
                else:
                    job = None
                if job is not None:
                    if first and (self._resumed or self._ready):
                        self._wake()  # more waits: the next thread starts
                    return job
                if self._closing or (until_idle and not self._in_progress):
                    return None
                self._idle += 1
                self._work.wait()

    def _done(self, key: str | None) -> None:
        with self._work:
            self._in_progress -= 1
            if key is not None:
                waiting = self._blocked.get(key)
                if waiting:
                    self._ready.append((key, waiting.popleft()))
                    self._blocked_count -= 1
                    if not waiting:
                        del self._blocked[key]
                else:
                    self._busy.discard(key)
            if self._ready and self._idle:
                self._wake()  # the thread that ends here takes one; another may take the next
