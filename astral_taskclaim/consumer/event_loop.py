"""Internal: the one event loop a process runs its ``async def`` tasks on.

The loop runs in a thread of its own, started by the first run (and again
after a fork, or once the last :func:`event_loop_scope` has ended). A
worker running messages side by side hands each async run to it with
:func:`submit` and goes on: the run holds no thread while it awaits, and
its message's consumer goes on on a worker thread when it ends
(:data:`~astral_taskclaim.consumer.summary.Steps`). :func:`run_steps` and
:func:`_run_awaitable` block the calling thread instead (one message at a
time, ``consume_claimed()``). Either way every ``async def`` run of the
process shares the loop: a run costs a hand-off between two threads, not
a new loop and a thread per run (what ``async_to_sync`` does when called
from a plain thread).

Django's ORM in an ``async def`` task (``await Model.objects.acreate()``,
``sync_to_async(thread_sensitive=True)``, the default) runs in asgiref's one
thread for thread-sensitive code, as in any asyncio program that is not
inside ``async_to_sync``: one database connection for every async task of
the process, its calls one after another. That thread's connections are
closed as Django closes a request's after each run (``close_old_connections``:
one that failed, or is older than ``CONN_MAX_AGE``), and for good when the
last :func:`event_loop_scope` ends (each worker's run is one), which also
stops the loop. (Inside a ``TestCase``'s atomic block the consumer awaits a
run on the calling thread instead, so its ORM calls see the test's data.)

A task that blocks the loop (``time.sleep()``, a sync HTTP call) holds up
every async task of the process for as long; sync tasks, other queues, lease
extension and shutdown go on, since they run on threads of their own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from asgiref.sync import async_to_sync, sync_to_async
from django.db import close_old_connections, connections

T = TypeVar("T")

_lock = threading.Lock()
#: The running loop, its thread and the process that started them.
_running: tuple[asyncio.AbstractEventLoop, threading.Thread, int] | None = None
#: Scopes open (workers running): the loop stops when the last one ends.
_scopes = 0


class _Escaped(Exception):
    """Carries a ``BaseException`` a run raised out of the loop, to be
    raised again as it was in the waiting thread."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error


def _loop() -> asyncio.AbstractEventLoop:
    global _running
    with _lock:
        if _running is not None and _running[2] == os.getpid() and _running[1].is_alive():
            return _running[0]
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="taskclaim-event-loop", daemon=True)
        thread.start()
        _running = (loop, thread, os.getpid())
        return loop


async def _guarded(awaitable: Awaitable[object]) -> object:
    try:
        return await awaitable
    except (SystemExit, KeyboardInterrupt, asyncio.CancelledError) as error:
        # The first two would stop the loop; the last would reach the lane
        # as concurrent.futures' CancelledError, without its traceback.
        raise _Escaped(error) from None
    finally:
        # As Django does after a request: drop a connection that failed or
        # is too old, so the next run does not inherit it.
        await sync_to_async(close_old_connections, thread_sensitive=True)()


def _run_awaitable(awaitable: Awaitable[object]) -> object:
    """Awaits ``awaitable`` on the process's event loop; returns its result
    or raises what it raised. Not from the loop's own thread."""
    loop = _loop()
    if threading.current_thread() is _thread_of(loop):
        if inspect.iscoroutine(awaitable):
            awaitable.close()  # never to run: no "never awaited" warning
        raise RuntimeError("_run_awaitable() called from the event loop it runs on")
    future = asyncio.run_coroutine_threadsafe(_guarded(awaitable), loop)
    try:
        return future.result()
    except _Escaped as escaped:
        raise escaped.error from None


def submit(
    awaitable: Awaitable[object], then: Callable[[object, BaseException | None], object]
) -> None:
    """Starts awaiting ``awaitable`` on the process's event loop and returns
    at once; when it ends, ``then(result, None)``, or ``then(None, error)``
    with what it raised, is called on the loop's thread (it must be quick)."""
    future = asyncio.run_coroutine_threadsafe(_guarded(awaitable), _loop())

    def done(ended: concurrent.futures.Future[object]) -> None:
        try:
            result = ended.result()
        except _Escaped as escaped:
            then(None, escaped.error)
        except BaseException as error:
            then(None, error)
        else:
            then(result, None)

    future.add_done_callback(done)


def awaited(result: object, alias: str) -> Generator[Awaitable[object], object, None]:
    """Yields ``result`` if a run returned an awaitable, to be awaited by
    the caller on the process's one event loop, beside every other async
    run; inside a ``TestCase``'s atomic block on database ``alias`` (the
    only one a consumer runs in) awaits it here instead, so the run's ORM
    calls stay on this thread's connection, in the test's transaction."""
    if result is None or not inspect.isawaitable(result):
        return
    if connections[alias].in_atomic_block:
        async_to_sync(_await)(result)
    else:
        yield result


async def _await(awaitable: Awaitable[object]) -> None:
    await awaitable


def run_steps(steps: Generator[Awaitable[object], object, T]) -> T:
    """Runs ``steps`` to its end on this thread, awaiting each awaitable it
    yields with :func:`_run_awaitable` and sending back the result (or
    throwing in what it raised); returns what ``steps`` returns."""
    value: object = None
    error: BaseException | None = None
    while True:
        try:
            awaitable = steps.send(value) if error is None else steps.throw(error)
        except StopIteration as stop:
            return cast(T, stop.value)
        try:
            value, error = _run_awaitable(awaitable), None
        except BaseException as raised:
            value, error = None, raised


@contextmanager
def event_loop_scope() -> Iterator[None]:
    """Inside the block the loop, once started, keeps running; when the
    last open block ends (no run can be in flight then), the loop's
    thread-sensitive connections are closed and the loop stops."""
    global _scopes
    with _lock:
        _scopes += 1
    try:
        yield
    finally:
        with _lock:
            _scopes -= 1
            last = _scopes == 0
        if last:
            _stop()


def _stop() -> None:
    global _running
    with _lock:
        running, _running = _running, None
    if running is None or running[2] != os.getpid() or not running[1].is_alive():
        return
    loop, thread, _ = running
    close: Coroutine[Any, Any, None] = sync_to_async(connections.close_all, thread_sensitive=True)()
    asyncio.run_coroutine_threadsafe(close, loop).result()
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()


def _thread_of(loop: asyncio.AbstractEventLoop) -> threading.Thread | None:
    running = _running
    return running[1] if running is not None and running[0] is loop else None
