"""The failover tests' load: producers that record, client side, every
enqueue the database acknowledged, and the audit of what ran.

- :class:`Producer`: ``enqueue_claimed`` on a queue (the PostgreSQL queue
  the workers consume, or the SQS queue's outbox the relay empties).
- :class:`BulkProducer`: ``enqueue_claimed_many`` of several keys at once.
- :class:`AsyncProducer`: ``aenqueue_claimed`` on the app's async pool.
- :class:`TaskProducer`: Django Tasks' ``enqueue()`` on this app's backend,
  each acknowledged run's result id kept.

Each runs on a thread as fast as the database answers; a failed enqueue is
not acknowledged (and the next one reconnects, as Django does between
requests). Keys are ``<kind><n>`` on :data:`KEYS` keys per producer.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, connection

from astral_taskclaim.claims.async_api import aclose_connections, aenqueue_claimed
from astral_taskclaim.claims.bulk import enqueue_claimed_many
from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.claims.writing import Sender
from tests.failover.workerapp.tasks import noted

__all__ = [
    "KEYS",
    "WINDOW",
    "Ack",
    "AsyncProducer",
    "BulkProducer",
    "Producer",
    "TaskProducer",
    "overlaps",
]

KEYS = 20
WINDOW = 1.0  # seconds: each key is claimed again many times in a run
#: Longest wait for one producer's next acknowledgements.
PROGRESS_DEADLINE = 90.0


@dataclass(frozen=True)
class Ack:
    """An enqueue the database acknowledged: its claim token (a Django
    Task's result id) and when it was sent and answered."""

    kind: str
    key: str
    seq: int
    token: str
    sent: float
    answered: float


class Producer(threading.Thread):
    """Claimed enqueues of ``{"kind", "seq"}`` to ``queue``."""

    #: Seconds between acknowledged enqueues (0: none); a claimed producer
    #: is held to :data:`KEYS` per :data:`WINDOW` by its claims already.
    pace = 0.0

    def __init__(self, kind: str, queue: Sender | None = None) -> None:
        super().__init__(daemon=True, name=f"producer-{kind}")
        self.kind = kind
        self.queue = queue
        self.acks: list[Ack] = []
        self.errors = 0
        self.stopping = threading.Event()

    def enqueue(self, key: str, seq: int) -> str | None:
        """One enqueue; its token, or ``None`` while a claim holds ``key``."""
        assert self.queue is not None
        body = {"kind": self.kind, "seq": seq}
        return enqueue_claimed(self.queue, key, body, window_seconds=WINDOW)

    def run(self) -> None:
        try:
            for seq in itertools.count(1):
                if self.stopping.is_set():
                    return
                key, sent = f"{self.kind}{seq % KEYS}", time.time()
                try:
                    token = self.enqueue(key, seq)
                except DatabaseError:
                    self.errors += 1
                    connection.close()
                    self.stopping.wait(0.05)
                    continue
                if token is not None:
                    self.acks.append(Ack(self.kind, key, seq, token, sent, time.time()))
                    self.stopping.wait(self.pace)
        finally:
            connection.close()

    def await_acks(self, more: int) -> None:
        """Until ``more`` enqueues beyond the current count are acknowledged."""
        wanted = len(self.acks) + more
        deadline = time.monotonic() + PROGRESS_DEADLINE
        while len(self.acks) < wanted and time.monotonic() < deadline and self.is_alive():
            self.stopping.wait(0.05)
        assert len(self.acks) >= wanted, f"the {self.kind} producer made no progress"

    def stop(self) -> None:
        self.stopping.set()
        self.join(PROGRESS_DEADLINE)
        assert not self.is_alive(), f"the {self.kind} producer did not stop"


class BulkProducer(Producer):
    """``enqueue_claimed_many`` of :data:`BATCH` keys a call (one statement
    on the PostgreSQL queue), each key's acknowledgement its own ack."""

    BATCH = 5

    def run(self) -> None:
        assert self.queue is not None
        try:
            for call in itertools.count():
                if self.stopping.is_set():
                    return
                seqs = range(call * self.BATCH + 1, (call + 1) * self.BATCH + 1)
                items = [
                    (f"{self.kind}{seq % KEYS}", {"kind": self.kind, "seq": seq}) for seq in seqs
                ]
                sent = time.time()
                try:
                    tokens = enqueue_claimed_many(self.queue, items, window_seconds=WINDOW)
                except DatabaseError:
                    self.errors += 1
                    connection.close()
                    self.stopping.wait(0.05)
                    continue
                answered = time.time()
                for seq, (key, _), token in zip(seqs, items, tokens, strict=True):
                    if token is not None:
                        self.acks.append(Ack(self.kind, key, seq, token, sent, answered))
        finally:
            connection.close()


class TaskProducer(Producer):
    """Django Tasks ``noted.enqueue(seq)``: one result row per run, its id
    the ack's token (no coalescing, so every enqueue is a run), at most 50
    a second: unpaced it outruns the workers by thousands, and the drain
    would take minutes."""

    pace = 0.02

    def __init__(self) -> None:
        super().__init__("task")

    def enqueue(self, key: str, seq: int) -> str | None:
        return str(noted.enqueue(seq).id)


class AsyncProducer(Producer):
    """``aenqueue_claimed`` from an event loop of its own, through the
    async pool (its connections are not Django's)."""

    def run(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        assert self.queue is not None
        try:
            for seq in itertools.count(1):
                if self.stopping.is_set():
                    return
                key, sent = f"{self.kind}{seq % KEYS}", time.time()
                body: dict[str, Any] = {"kind": self.kind, "seq": seq}
                try:
                    token = await aenqueue_claimed(self.queue, key, body, window_seconds=WINDOW)
                except DatabaseError:
                    self.errors += 1
                    await asyncio.sleep(0.05)
                    continue
                if token is not None:
                    self.acks.append(Ack(self.kind, key, seq, token, sent, time.time()))
        finally:
            await aclose_connections()


def overlaps(acks: list[Ack]) -> list[tuple[Ack, Ack]]:
    """Pairs of acknowledged claims of one key where the second was surely
    taken while the first held it: answered before the first was sent plus
    the window (the server's claim times lie within sent..answered)."""
    found = []
    by_key: dict[str, list[Ack]] = {}
    for ack in sorted(acks, key=lambda a: a.sent):
        by_key.setdefault(ack.key, []).append(ack)
    for claims in by_key.values():
        for first, second in itertools.pairwise(claims):
            if second.answered < first.sent + WINDOW:
                found.append((first, second))
    return found
