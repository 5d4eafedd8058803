"""Claims from many threads of one process, grouped into one statement
(row 2's grouped variant; kept with the benchmarks, not shipped: on the
reference machine it does not beat one ``claim_task`` per thread, see
docs/benchmarks.md).

A claim asks the server once per call, so a process whose threads trigger
keys as fast as they can is bounded by one round trip per trigger and
thread. :class:`ClaimGroup` lifts that bound: a thread calling
:meth:`ClaimGroup.claim` while another thread's statement is in flight
waits for it to finish, and then one of the waiting threads claims every
key that gathered meanwhile in one :func:`~astral_taskclaim.claims.bulk.claim_tasks`
statement (on its own connection) and hands each caller its answer.

The answers are exactly those of :func:`~astral_taskclaim.claims.claim.claim_task`
made in the order the calls joined the group: a call's key is looked up by
a statement that starts after the call was made, so a claim another process
released, or one that expired, before the call is always seen; and of two
calls for the same free key in one group only the first gets a token.
A call with no other call in flight is sent at once, alone, so a group
adds no wait to a process that claims one key at a time.

Inside a transaction, where a claim must join the caller's own
transaction, :meth:`ClaimGroup.claim` calls ``claim_task`` directly.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from django.db import connections

from astral_taskclaim.claims.bulk import claim_tasks
from astral_taskclaim.claims.claim import claim_task
from astral_taskclaim.claims.writing import in_transaction, resolve_alias
from astral_taskclaim.core.validation import validate_key, validate_window

__all__ = ["ClaimGroup"]

#: Statements one sender sends in a row before handing over to a waiting
#: caller: going on saves waking another thread first, handing over bounds
#: how long the sender's own caller waits for its answer.
SENDS = 8


@dataclass
class _Call:
    key: str
    #: Set when the call is answered, or when it is made the next to send.
    woken: threading.Event = field(default_factory=threading.Event)
    sends: bool = False
    answered: bool = False
    token: str | None = None
    error: BaseException | None = None


class ClaimGroup:
    """Groups concurrent :meth:`claim` calls of one process into bulk claims.

    One group serves one database alias and one window; make one per
    (alias, window) pair a process claims with, and share it between its
    threads. ``max_keys`` bounds the keys of one statement.
    """

    def __init__(
        self, *, window_seconds: float, using: str | None = None, max_keys: int = 1000
    ) -> None:
        validate_window(window_seconds)
        if isinstance(max_keys, bool) or not isinstance(max_keys, int) or max_keys < 1:
            raise ValueError(f"max_keys must be a positive integer, got {max_keys!r}")
        if using is not None:
            resolve_alias(using)
        self.window_seconds = float(window_seconds)
        self.using = using
        self.max_keys = max_keys
        self._lock = threading.Lock()
        self._pending: list[_Call] = []
        self._sending = False

    def __repr__(self) -> str:
        return f"ClaimGroup(window_seconds={self.window_seconds!r}, using={self.using!r})"

    def claim(self, key: str) -> str | None:
        """Claims ``key`` for the group's window: a fresh token, or ``None``
        while an unexpired claim holds it (as ``claim_task`` answers)."""
        validate_key(key)
        alias = resolve_alias(self.using)
        if in_transaction(connections[alias]):
            return claim_task(key, window_seconds=self.window_seconds, using=alias)
        call = _Call(key)
        with self._lock:
            self._pending.append(call)
            if not self._sending:
                self._sending = True
                call.sends = True
        if not call.sends:
            call.woken.wait()
        if not call.answered:  # this thread sends the next statement
            self._send(alias)
        if call.error is not None:
            raise call.error
        return call.token

    def _send(self, alias: str) -> None:
        """Claims the keys of the oldest pending calls (the sender's first)
        in one statement on this thread's connection and answers those
        calls; goes on with the calls that gathered meanwhile, at most
        ``SENDS`` statements in all, then makes the oldest call still
        pending the next sender."""
        for _ in range(SENDS):
            with self._lock:
                calls = self._pending[: self.max_keys]
                del self._pending[: self.max_keys]
                if not calls:
                    self._sending = False
                    return
            try:
                keys = [call.key for call in calls]
                tokens = claim_tasks(keys, window_seconds=self.window_seconds, using=alias)
            except BaseException as error:  # each caller of this statement re-raises it
                tokens = [None] * len(calls)
                for call in calls:
                    call.error = error
            for call, token in zip(calls, tokens, strict=True):
                call.token = token
                call.answered = True
                call.woken.set()
        with self._lock:
            if self._pending:
                self._pending[0].sends = True
                self._pending[0].woken.set()
            else:
                self._sending = False
