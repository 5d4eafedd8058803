"""The transactional outbox of the remote queues: ``taskclaim.outbox``.

A Cloudflare or SQS queue configured with ``"OPTIONS": {"outbox": True}``
does not call its service when a task is enqueued. ``enqueue_claimed`` (and
its bulk and async forms) writes the claim and an outbox row in one
statement of the claims database, so they commit together, with the
caller's transaction when there is one, exactly as the PostgreSQL queue
does; the queue's ``send``/``send_many`` write outbox rows through the same
connection. A relay (:mod:`astral_taskclaim.worker.relay`, run by ``manage.py
taskclaim_relay``) then sends the rows to the service in batches and
deletes them once the service accepted them.

Rows hold each body exactly as the queue encoded it (its size already
checked), keyed by the queue's ``TASKCLAIM_QUEUES`` alias: renaming the
alias leaves its rows to nobody until a relay runs for the old name.
:func:`outbox_status` gives each outbox's depth and the age of its oldest
row, for the admin overview and monitoring.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connections

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.db import statements
from astral_taskclaim.queues.base import ClaimedInsert, TextWriter

__all__ = [
    "Failure",
    "OutboxStatus",
    "Row",
    "claimed_insert",
    "delete",
    "insert",
    "outbox_status",
    "retry",
    "take",
]

#: Outbox depths are counted exactly up to this many rows.
_DEPTH_BOUND = 10_000


def claimed_insert(queue: str, writer: Callable[[float], TextWriter]) -> ClaimedInsert:
    """The statements writing claims and the outbox rows of queue alias
    ``queue`` together, bodies written by ``writer``."""
    return ClaimedInsert(
        one="outbox/enqueue.sql",
        many="outbox/enqueue_many.sql",
        trail_many="outbox/trail_many.sql",
        params={"queue": queue},
        writer=writer,
    )


def insert(
    database: str, queue: str, encoded: Sequence[bytes], *, delay_seconds: float = 0
) -> None:
    """Writes ``encoded`` bodies to the outbox of ``queue``, in order, in
    the caller's transaction on ``database`` if there is one; the relay
    sends them once ``delay_seconds`` have passed."""
    if encoded:
        bodies = [data.decode("utf-8") for data in encoded]
        params = {"queue": queue, "bodies": bodies, "delay": float(delay_seconds)}
        statements.run(database, "outbox/send.sql", params)


@dataclass(frozen=True)
class Row:
    """An outbox row the relay took: its id, body and failed sends so far."""

    id: int
    body: bytes
    attempts: int


@dataclass(frozen=True)
class Failure:
    """A failed send of row ``id``: ``error``, the reason kept on the row;
    ``dead``: set aside for good; ``delay``: seconds the row then waits
    (``None``: it keeps its place)."""

    id: int
    error: str
    dead: bool = False
    delay: float | None = None


def take(database: str, queue: str, limit: int) -> list[Row]:
    """Up to ``limit`` of the due rows of ``queue``'s outbox (not set aside,
    not waiting), earliest first, locked until the caller's transaction
    ends; rows another relay holds are skipped."""
    rows = statements.run(database, "outbox/take.sql", {"queue": queue, "limit": limit})
    return [Row(id_, body.encode("utf-8"), attempts) for id_, body, attempts in rows]


def record_failures(database: str, failures: Sequence[Failure]) -> None:
    """Counts a failed send on each row of ``failures`` and keeps its error;
    sets the dead ones aside, delays the others by their ``delay``."""
    if failures:
        params = {
            "ids": [failure.id for failure in failures],
            "errors": [failure.error for failure in failures],
            "dead": [failure.dead for failure in failures],
            "delays": [failure.delay for failure in failures],
        }
        statements.run(database, "outbox/failed.sql", params)


def retry(database: str, ids: Sequence[int]) -> int:
    """Makes rows ``ids`` that were set aside (or wait out a backoff) due
    now; how many were."""
    return statements.Connector(database).execute("outbox/retry.sql", {"ids": list(ids)})


def delete(database: str, ids: Sequence[int]) -> None:
    """Deletes the outbox rows ``ids`` (the service accepted them)."""
    if ids:
        statements.run(database, "outbox/delete.sql", {"ids": list(ids)})


def database_problem() -> str | None:
    """What keeps the claims database from holding the outbox (it must be
    the PostgreSQL database ``taskclaim.outbox`` is migrated into), if
    anything: the text of check E015."""
    alias = app_settings.DATABASE
    engine = str(connections.settings[alias].get("ENGINE", "")) if alias in connections else ""
    if engine.startswith("django.db.backends.postgresql"):
        return None
    return (
        f"needs TASKCLAIM_DATABASE ({alias!r}) to be PostgreSQL, where the outbox table "
        f"lives; it is {engine or 'not configured'}"
    )


def _outbox_aliases() -> list[str]:
    """The ``TASKCLAIM_QUEUES`` aliases configured with an outbox."""
    configured: dict[str, Any] = app_settings.QUEUES
    return [
        alias
        for alias, config in configured.items()
        if isinstance(config, dict)
        and isinstance(config.get("OPTIONS"), dict)
        and config["OPTIONS"].get("outbox") is True
    ]


@dataclass(frozen=True)
class OutboxStatus:
    """One queue's outbox: rows waiting for the relay, the oldest's age, and
    the rows set aside (the service refused them for good).

    ``depth`` is exact when ``depth_exact``; otherwise there are more rows
    than ``depth``, the 10,000 counted exactly. ``oldest_seconds`` is ``None``
    for an empty outbox. ``dead`` counts the rows set aside, up to the
    same bound.
    """

    queue: str
    depth: int
    depth_exact: bool
    oldest_seconds: float | None
    dead: int = 0


def outbox_status(
    queues: Iterable[str] | None = None, *, using: str | None = None
) -> list[OutboxStatus]:
    """The status of the outbox of each of ``queues`` (default: every queue
    configured with an outbox), by alias, in one statement on the claims
    database (or ``using``). A growing depth or an old oldest row means no
    relay runs, or the service refuses the relay's sends; rows set aside
    wait for the admin's retry or delete."""
    names = sorted(_outbox_aliases() if queues is None else set(queues))
    if not names:
        return []
    alias = using if using is not None else statements.configured_alias()
    params = {"queues": names, "bound": _DEPTH_BOUND + 1}
    return [
        OutboxStatus(
            queue=name,
            depth=min(depth, _DEPTH_BOUND),
            depth_exact=depth <= _DEPTH_BOUND,
            oldest_seconds=None if oldest is None else max(float(oldest), 0.0),
            dead=min(dead, _DEPTH_BOUND),
        )
        for name, depth, oldest, dead in statements.run(alias, "outbox/status.sql", params)
    ]
