"""Tools for tests against a real PostgreSQL: transactions that always roll
back, backend pids, and observing and holding advisory locks.

An advisory lock is named by its ``bigint`` key, the one passed to
``pg_advisory_lock(bigint)`` and friends: give the key as an ``int``, or give
a ``str`` name, meaning the key ``hashtextextended(name, 0)`` computes (the
usual way to turn a name into a lock key). The two-``int4`` form of the lock
functions is not covered. Only locks of the connection's own database count.

Every function takes ``using``, a database alias, defaulting to the claims
database (``TASKCLAIM_DATABASE``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

from django.db import connections, transaction

from astral_taskclaim.claims.writing import resolve_alias
from astral_taskclaim.db.statements import Connector

__all__ = [
    "AdvisoryLock",
    "HeldTransaction",
    "backend_pid",
    "hold_transaction",
    "lock_holders",
    "lock_waiters",
    "rolled_back",
]

T = TypeVar("T")

AdvisoryLock = int | str
"""An advisory lock: its ``bigint`` key, or a name hashed by
``hashtextextended(name, 0)``."""

_BIGINT = range(-(2**63), 2**63)


def rolled_back(fn: Callable[[], T], *, using: str | None = None) -> T:
    """Runs ``fn()`` in a transaction (a savepoint when one is open) that always
    rolls back, and returns its result. An exception from ``fn`` propagates."""
    alias = resolve_alias(using)
    with transaction.atomic(using=alias):
        result = fn()
        transaction.set_rollback(True, using=alias)
    return result


def backend_pid(*, using: str | None = None) -> int:
    """The backend pid of this thread's connection to ``using``."""
    return int(_fetch(resolve_alias(using), "testing/backend_pid.sql", {})[0])


def lock_holders(lock: AdvisoryLock, *, using: str | None = None) -> list[int]:
    """Backend pids of the sessions holding ``lock``, in either mode, sorted."""
    return _fetch(resolve_alias(using), "testing/lock_holders.sql", _lock_params(lock))


def lock_waiters(lock: AdvisoryLock, holder: int, *, using: str | None = None) -> list[int]:
    """Backend pids of the sessions waiting for ``lock`` behind the session
    whose backend pid is ``holder``, sorted."""
    if isinstance(holder, bool) or not isinstance(holder, int) or holder <= 0:
        raise ValueError(f"holder must be a backend pid (a positive int), got {holder!r}")
    params = {**_lock_params(lock), "holder": holder}
    return _fetch(resolve_alias(using), "testing/lock_waiters.sql", params)


def _lock_params(lock: object) -> dict[str, Any]:
    if isinstance(lock, str):
        if "\x00" in lock:
            raise ValueError("lock name must not contain NUL characters")
        return {"key": None, "name": lock}
    if isinstance(lock, bool) or not isinstance(lock, int):
        raise TypeError(f"lock must be an int key or a str name, got {type(lock).__name__}")
    if lock not in _BIGINT:
        raise ValueError(f"lock key must fit a bigint, got {lock}")
    return {"key": lock, "name": None}


def _fetch(alias: str, path: str, params: dict[str, Any]) -> list[int]:
    return [int(row[0]) for row in Connector(alias).fetch(path, params)]


@dataclass
class HeldTransaction:
    """A transaction :func:`hold_transaction` keeps open in another thread.

    Also a context manager: leaving the block releases the transaction and
    waits for it to end (re-raising its error, if any).
    """

    #: Backend pid of the holding session.
    holder: int
    _released: threading.Event = field(repr=False)
    _done: Future[Any] = field(repr=False)

    def release(self) -> None:
        """Lets the transaction end. Idempotent."""
        self._released.set()

    def result(self, timeout: float | None = None) -> Any:
        """Waits for the transaction's end: the body's return value, or its
        exception raised here."""
        return self._done.result(timeout)

    @property
    def done(self) -> bool:
        """Whether the transaction's thread has finished."""
        return self._done.done()

    def __enter__(self) -> HeldTransaction:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
        error = self._done.exception()  # waits for the end
        if error is not None and exc is None:
            raise error


def hold_transaction(
    body: Callable[[Callable[[], None]], object], *, using: str | None = None
) -> HeldTransaction:
    """Runs ``body(hold)`` in a new thread, on that thread's own connection,
    and returns once ``body`` calls ``hold()``: typically inside
    ``transaction.atomic()``, after taking the locks the test needs::

        def body(hold):
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(42)")
                hold()  # blocks until release()

        with hold_transaction(body) as held:
            assert lock_holders(42) == [held.holder]

    ``hold()`` records the session's backend pid (``holder``) and blocks until
    :meth:`HeldTransaction.release`. Raises ``RuntimeError`` (chained to the
    body's exception, if any) when ``body`` ends before calling ``hold()``.
    """
    alias = resolve_alias(using)
    released = threading.Event()
    held: Future[int] = Future()
    done: Future[Any] = Future()

    def hold() -> None:
        if held.done():
            raise RuntimeError("hold() may be called only once")
        held.set_result(backend_pid(using=alias))
        released.wait()

    def run() -> None:
        try:
            result = body(hold)
        except BaseException as error:
            done.set_exception(error)
        else:
            done.set_result(result)
        finally:
            connections.close_all()  # this thread's connections only

    threading.Thread(target=run, name="hold_transaction", daemon=True).start()
    wait([held, done], return_when=FIRST_COMPLETED)
    if held.done():
        return HeldTransaction(holder=held.result(), _released=released, _done=done)
    raise RuntimeError("the transaction ended before holding") from done.exception()
