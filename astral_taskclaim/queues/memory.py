"""An in-memory queue for tests and development::

    TASKCLAIM_QUEUES = {
        "default": {"BACKEND": "astral_taskclaim.queues.memory.MemoryQueue"},
    }

The PostgreSQL queue's semantics (leases, ``attempts``, delays, stale
settlements skipped, lease extension), process-local and thread-safe:
instances with the same ``queue_name`` share one store. Options:
``queue_name`` (default: the alias), ``visibility_timeout`` (default 60 s).
Not ``transactional``: sends happen at once.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from astral_taskclaim.queues import options as opts
from astral_taskclaim.queues.base import BaseQueue, QueueStatus
from astral_taskclaim.queues.messages import MAX_DELAY_SECONDS, MessageBatch, ReceivedMessage

_DEFAULT_VISIBILITY_TIMEOUT = 60.0
_MAX_QUEUE_NAME_BYTES = 1024


@dataclass
class _Entry:
    id: int
    body: str
    attempts: int
    visible_at: float
    lease: str | None = None


class _MemoryStore:
    """The messages of one queue name; ``clock`` (seconds, monotonic) can
    be replaced in tests to move time forward without waiting."""

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self.entries: dict[int, _Entry] = {}
        self.ids = itertools.count(1)
        self.clock: Callable[[], float] = time.monotonic

    def add(self, bodies: Sequence[str], delay: float) -> None:
        with self.condition:
            visible_at = self.clock() + delay
            for body in bodies:
                entry = _Entry(next(self.ids), body, 0, visible_at)
                self.entries[entry.id] = entry
            self.condition.notify_all()


_stores: dict[str, _MemoryStore] = {}
_stores_lock = threading.Lock()


def _store_for(queue_name: str) -> _MemoryStore:
    """The process's store for ``queue_name``, created on first use."""
    with _stores_lock:
        return _stores.setdefault(queue_name, _MemoryStore())


def reset() -> None:
    """Forgets every in-memory queue's messages (between tests)."""
    with _stores_lock:
        _stores.clear()


class MemoryQueue(BaseQueue):
    """A process-local queue (see the module docstring)."""

    supports_lease_extension = True
    option_spec = {
        "queue_name": opts.queue_name_option(_MAX_QUEUE_NAME_BYTES),
        "visibility_timeout": opts.seconds_option(_DEFAULT_VISIBILITY_TIMEOUT, MAX_DELAY_SECONDS),
    }

    def __init__(self, alias: str, *, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(alias, options=options)
        self.queue_name: str = self.config["queue_name"]
        self.visibility_timeout: float = self.config["visibility_timeout"]

    @property
    def store(self) -> _MemoryStore:
        """This queue's shared store (looked up each time, so :func:`reset`
        takes effect on existing instances)."""
        self.ensure_configured()
        return _store_for(self.queue_name)

    def send(self, body: Any, *, delay_seconds: float = 0) -> None:
        """Queues ``body``, visible after ``delay_seconds``."""
        delay = opts.delay_seconds(delay_seconds, self.max_delay_seconds)
        self.store.add([self.encode(body).decode("utf-8")], delay)

    def send_many(self, bodies: Sequence[Any]) -> None:
        """Queues ``bodies`` in order: all of them or, on a bad one, none."""
        self.check_batch(bodies)
        texts = [self.encode(body).decode("utf-8") for body in bodies]
        self.store.add(texts, 0)

    def receive(self, *, max_messages: int, wait_seconds: float = 0) -> MessageBatch:
        """Leases up to ``max_messages`` visible messages, oldest due first;
        waits up to ``wait_seconds`` for the first."""
        limit = opts.max_messages(max_messages, self.max_batch_size)
        wait = opts.wait_seconds(wait_seconds)
        store = self.store
        deadline = time.monotonic() + wait
        with store.condition:
            while True:
                now = store.clock()
                due = sorted(
                    (e for e in store.entries.values() if e.visible_at <= now),
                    key=lambda e: (e.visible_at, e.id),
                )[:limit]
                remaining = deadline - time.monotonic()
                if due or remaining <= 0:
                    return MessageBatch(self.name, self._lease(due, now))
                pending = [e.visible_at - now for e in store.entries.values()]
                store.condition.wait(min([remaining, *pending]))

    def _lease(self, due: list[_Entry], now: float) -> list[ReceivedMessage]:
        lease = str(uuid.uuid4())
        received = []
        for entry in due:
            entry.attempts += 1
            entry.lease = lease
            entry.visible_at = now + self.visibility_timeout
            body = json.loads(entry.body)  # a fresh copy for every delivery
            received.append(
                ReceivedMessage(body, entry.attempts, receipt=(entry.id, lease), id=str(entry.id))
            )
        return received

    def settle(self, messages: Sequence[ReceivedMessage]) -> None:
        """Applies the recorded acks and retries; stale ones are skipped."""
        decided = [m for m in messages if m.settlement is not None]
        if not decided:
            return
        for message in decided:
            _check_receipt(message)
        store = self.store
        stale = 0
        with store.condition:
            now = store.clock()
            for message in decided:
                id_, lease = message.receipt
                entry = store.entries.get(id_)
                if entry is None or entry.lease != lease:
                    stale += 1
                elif message.settlement == "ack":
                    del store.entries[id_]
                else:
                    entry.lease = None
                    entry.visible_at = now + float(message.delay_seconds)
            store.condition.notify_all()
        if stale:
            self._log_stale_settlements(stale)

    def status(self) -> QueueStatus:
        """Ready, delayed and leased messages (ages are not kept)."""
        store = self.store
        with store.condition:
            now = store.clock()
            waiting = [entry for entry in store.entries.values() if entry.visible_at > now]
            leased = sum(1 for entry in waiting if entry.lease is not None)
            return QueueStatus(len(store.entries) - len(waiting), len(waiting) - leased, leased)

    def lease_seconds(self) -> float:
        """``visibility_timeout``: how long a receive leases its messages."""
        return self.visibility_timeout

    def extend_leases(
        self, messages: Sequence[ReceivedMessage], *, seconds: float
    ) -> list[ReceivedMessage]:
        """Leases of ``messages`` end ``seconds`` from now (never earlier
        than they did), for those still under the lease each was received
        with; returns them."""
        seconds = opts.lease_seconds(seconds, self.max_delay_seconds)
        for message in messages:
            _check_receipt(message)
        store = self.store
        extended = []
        with store.condition:
            until = store.clock() + seconds
            for message in messages:
                id_, lease = message.receipt
                entry = store.entries.get(id_)
                if entry is not None and entry.lease == lease:
                    entry.visible_at = max(entry.visible_at, until)
                    extended.append(message)
        return extended

    def count(self) -> int:
        """Messages in the queue, leased and delayed ones included."""
        store = self.store
        with store.condition:
            return len(store.entries)

    def purge(self) -> None:
        """Deletes every message of this queue."""
        store = self.store
        with store.condition:
            store.entries.clear()


def _check_receipt(message: ReceivedMessage) -> None:
    receipt = message.receipt
    if not (
        isinstance(receipt, tuple)
        and len(receipt) == 2
        and isinstance(receipt[0], int)
        and isinstance(receipt[1], str)
    ):
        raise ValueError(f"message {message.id!r} was not received from a MemoryQueue")
