"""Time limits on task runs: what becomes of a run that goes on too long.

A run's limit is its task's ``time_limit`` (``@claimed_task(time_limit=...)``,
or a ``ClaimTaskBackend``'s ``time_limit`` option for its Django Tasks),
else its queue's ``TIME_LIMIT``; none by default. It counts from the call of
the task to its return, an ``async def`` task's awaiting included; the claim
write and the settlement after it are not part of it. A run past its limit
is a failed attempt, :class:`~astral_taskclaim.consumer.failures.TimeLimitExceeded`,
retried or given up by the usual rules, counted in the summary's
``timed_out`` and logged as ``queue.task_timed_out``:

- an ``async def`` task is cancelled (``asyncio.timeout()``), and the worker
  goes on;
- a sync task with a limit runs on a thread of its own (one of those kept
  for such runs, each with its own database connections) while its message
  waits on the process's event loop (:mod:`.event_loop`), holding no lane.
  Python cannot stop a thread: at the limit the attempt fails at once and
  the thread is left to its run, never used again, and the hang is reported
  to every :func:`time_limits_scope` open (each worker of the process), so
  the workers stop after their running messages and exit for their
  supervisor to restart them, the thread ending with the process (outside
  a worker, ``consume_claimed()`` called directly, it is only left running).

Without a limit nothing changes: a sync task runs on its consumer's thread.
Inside a ``TestCase``'s atomic block a sync task runs in place, without its
limit, so its ORM calls see the test's transaction. A task that never gives
the event loop back (``time.sleep()`` in an ``async def`` task) or holds the
GIL (a C extension that never releases it) stops the process's clock too:
no limit can fire then.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import logging
import os
import queue
import sys
import threading
import traceback
from collections.abc import Awaitable, Callable, Generator, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from django.db import close_old_connections, connections

from astral_taskclaim.consumer.event_loop import awaited
from astral_taskclaim.consumer.failures import (
    TimeLimitExceeded,
    TransactionLeftOpen,
    roll_back_left_open,
)
from astral_taskclaim.consumer.summary import ConsumeSummary, TaskOptions
from astral_taskclaim.core.envelope import Envelope
from astral_taskclaim.core.logtext import printable

logger = logging.getLogger(__name__)

#: Told of each sync run left running past its limit: its queue, key and limit.
HangListener = Callable[[str, str, float], object]

_lock = threading.Lock()
#: The run threads waiting for a run, and the process they belong to.
_idle: list[_RunThread] = []
_idle_pid = os.getpid()
#: The open scopes' listeners: the idle run threads end with the last.
_listeners: list[HangListener] = []


@dataclass(frozen=True, slots=True)
class _Run:
    """The run a limit applies to, for its log line and counter."""

    summary: ConsumeSummary
    key: str
    attempts: int
    seconds: float

    def timed_out(self, *, hung: bool, stack: str = "") -> TimeLimitExceeded:
        """Counts and logs the run past its limit (on the event loop's
        thread, while the message's consumer waits for it), with the
        ``stack`` of a thread left running; the failure."""
        alias = self.summary.queue
        self.summary.timed_out += 1
        then = "its thread is left running; the worker exits for a restart" if hung else "cancelled"
        logger.warning(
            "%s task %s ran past its time limit of %g s (attempt %d); %s%s",
            *(printable(alias), printable(self.key), self.seconds, self.attempts, then),
            f", where it is now:\n{stack}" if stack else "",
            extra={
                "event": "queue.task_timed_out",
                "queue": alias,
                "key": self.key,
                "attempts": self.attempts,
                "time_limit": self.seconds,
                "hung": hung,
            },
        )
        if hung:
            with _lock:
                listeners = list(_listeners)
            for listener in listeners:
                listener(alias, self.key, self.seconds)
        return TimeLimitExceeded(self.seconds, hung=hung)


class _Consumer(Protocol):
    """What of a bound ``Consumer`` a run needs: its database and its
    queue's ``TIME_LIMIT``."""

    alias: str
    time_limit: float | None


def run_within(
    options: TaskOptions,
    task: Any,
    found: Envelope,
    attempts: int,
    summary: ConsumeSummary,
    consumer: _Consumer,
) -> Generator[Awaitable[object], object, None]:
    """Runs ``options.run(task)``, attempt ``attempts`` of ``found``, within
    its time limit (the options', else the consumer's queue's; ``None``: no
    limit), as the consumer runs a task: the awaitable to wait for is
    yielded (on the process's one event loop) and what it raised is thrown
    back in. A run that leaves its database connection in a transaction
    fails with ``TransactionLeftOpen`` (rolled back)."""
    run, seconds, alias = options.run, options.time_limit or consumer.time_limit, consumer.alias
    if seconds is None:
        yield from awaited(run(task), alias)
    elif inspect.iscoroutinefunction(run) or connections[alias].in_atomic_block:
        # An async run holds no thread while it awaits; a sync one in a
        # test's transaction stays on its connection, without a limit.
        result = run(task)
        if inspect.isawaitable(result):
            result = _within(_Run(summary, found.key, attempts, seconds), result, None)
        yield from awaited(result, alias)
    else:
        call = functools.partial(contextvars.copy_context().run, _run_sync, run, task, alias)
        yield _within(_Run(summary, found.key, attempts, seconds), None, call)
    if roll_back_left_open(alias):
        raise TransactionLeftOpen(alias)


async def _within(
    limited: _Run, awaitable: Awaitable[object] | None, call: Callable[[], object] | None
) -> object:
    """Awaits ``awaitable``, or runs ``call`` on a run thread and awaits
    what it returns, cancelled at the limit."""
    thread = job = None
    timeout = asyncio.timeout(limited.seconds)
    try:
        async with timeout:
            if call is not None:
                thread = _take()
                job = thread.start(call)
                result = await _ended(job)
                awaitable = result if inspect.isawaitable(result) else None
            return None if awaitable is None else await awaitable
    except TimeoutError as error:
        if not timeout.expired():
            raise  # the task's own
        if thread is not None and job is not None and thread.abandon(job):
            raise limited.timed_out(hung=True, stack=thread.stack()) from None
        # Chained: the cancellation's traceback shows where the run was.
        raise limited.timed_out(hung=False) from error


def _ended(job: Future[object]) -> asyncio.Future[object]:
    """What ``job`` gives, on the running loop. Unlike ``wrap_future()``,
    a job that ends once the loop is closed (a run left past its limit,
    ending after its worker) is let be."""
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()

    def copy(ended: Future[object]) -> None:
        if waiter.cancelled():
            return
        error = ended.exception()
        if error is None:
            waiter.set_result(ended.result())
        else:
            waiter.set_exception(error)

    def done(ended: Future[object]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: no one waits any more
            loop.call_soon_threadsafe(copy, ended)

    job.add_done_callback(done)
    return waiter


def _run_sync(run: Callable[[Any], object], task: Any, alias: str) -> object:
    """``run(task)`` on a run thread, which rolls back a transaction the
    run left open on its own connection, as the consumer does on its."""
    try:
        result = run(task)
    except BaseException:
        roll_back_left_open(alias)
        raise
    if roll_back_left_open(alias):
        raise TransactionLeftOpen(alias)
    return result


class _RunThread:
    """A daemon thread running sync runs one at a time, with database
    connections of its own; idle again after each, unless abandoned."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[object], Callable[[], object]] | None]
        self._jobs = queue.SimpleQueue()
        self._abandoned = False
        #: The job it runs now (``None``: idle).
        self._running: Future[object] | None = None
        self.thread = threading.Thread(target=self._serve, name="taskclaim-run", daemon=True)
        self.thread.start()

    def start(self, call: Callable[[], object]) -> Future[object]:
        """Runs ``call`` next; its future."""
        job: Future[object] = Future()
        self._running = job
        self._jobs.put((job, call))
        return job

    def abandon(self, job: Future[object]) -> bool:
        """Leaves the thread to ``job`` past its limit, never to run
        another; whether ``job`` goes on (``False``: it just ended)."""
        with _lock:
            self._abandoned = self._running is job
            return self._abandoned

    def stop(self) -> None:
        self._jobs.put(None)

    def stack(self) -> str:
        """Where the thread is now, as a traceback shows it."""
        frame = sys._current_frames().get(self.thread.ident or 0)
        return "" if frame is None else "".join(traceback.format_stack(frame))

    def _serve(self) -> None:
        try:
            while (item := self._jobs.get()) is not None:
                job, call = item
                error: BaseException | None = None
                try:
                    result = call()
                except BaseException as raised:  # the task's: raised where it is awaited
                    result, error = None, raised
                # As the worker does around each message on its own threads.
                close_old_connections()
                with _lock:
                    self._running = None
                    if not self._abandoned:
                        # Idle before its run is seen to end: the end of the
                        # worker that waits for it finds it idle, to stop it.
                        _idle.append(self)
                if error is None:
                    job.set_result(result)
                else:
                    job.set_exception(error)
                del item, job, call, result, error  # an idle thread keeps nothing of its run
                if self._abandoned:
                    return
        finally:
            connections.close_all()


def _take() -> _RunThread:
    """An idle run thread, or a new one."""
    global _idle_pid
    with _lock:
        if _idle_pid != os.getpid():  # a forked child has none of its parent's threads
            _idle.clear()
            _idle_pid = os.getpid()
        if _idle:
            return _idle.pop()
    return _RunThread()


@contextmanager
def time_limits_scope(on_hang: HangListener) -> Iterator[None]:
    """Inside the block, ``on_hang(queue, key, seconds)`` is told of each
    sync run of the process left running past its limit (on the event
    loop's thread: it must be quick); when the last open block ends, the
    idle run threads end, closing their connections."""
    with _lock:
        _listeners.append(on_hang)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(on_hang)
            idle = [] if _listeners else list(_idle)
            if not _listeners:
                _idle.clear()
        for thread in idle:
            thread.stop()
        for thread in idle:
            thread.thread.join()
