"""Claiming many keys, and enqueueing many claimed tasks, in one call.

:func:`claim_tasks` is :func:`~astral_taskclaim.claims.claim_task` for a
list of keys in one statement; :func:`enqueue_claimed_many` is
:func:`~astral_taskclaim.claims.enqueue_claimed` for a list of
``(key, task)`` pairs, sending the claimed ones with ``send_many``. Both
behave as the single calls made one after the other: a key repeated in the
list is claimed (and sent) once, at its first position, and later
positions get ``None``, as a trigger inside the window would.

Keys are claimed in one order (bytewise), so two bulk calls with
overlapping keys lock rows in the same order and never deadlock each other.
The statements go through the Django connection of ``using`` (and so join
its transaction) with server-side parameters, prepared: a thousand keys
travel as one binary array instead of a thousand quoted literals. They do
not pass through Django's cursor wrappers (``connection.queries``,
``execute_wrapper``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, transaction

from . import sqlfiles
from .claims import (
    discard_broken_connection,
    envelope,
    in_transaction,
    resolve_alias,
    validate_key,
    validate_seconds,
    validate_task,
)

logger = logging.getLogger(__name__)


def _validated_keys(keys: object) -> list[str]:
    if isinstance(keys, str | bytes) or not isinstance(keys, Iterable):
        raise TypeError(f"keys must be a list of str, got {type(keys).__name__}")
    return [validate_key(key, name=f"keys[{index}]") for index, key in enumerate(keys)]


@contextmanager
def bound_cursor(alias: str) -> Iterator[psycopg.Cursor[Any]]:
    """A server-side-binding psycopg cursor on the Django connection of
    ``alias`` (its transaction, if any), raising Django's database errors."""
    connection = connections[alias]
    connection.ensure_connection()
    connection.validate_no_broken_transaction()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        yield cursor


def _claim_many(alias: str, keys: Sequence[str], window_seconds: float) -> dict[str, str]:
    """Fresh tokens of the keys this statement claimed; ``keys`` distinct."""
    if not keys:
        return {}
    params = {"keys": list(keys), "seconds": float(window_seconds)}
    with bound_cursor(alias) as cursor:
        cursor.execute(sqlfiles.read("taskclaim/claim_many.sql"), params, prepare=True)
        return {key: str(token) for key, token in cursor.fetchall()}


def claim_tasks(
    keys: Iterable[str], *, window_seconds: float, using: str | None = None
) -> list[str | None]:
    """Claims every key of ``keys`` for ``window_seconds`` in one statement.

    Returns, position by position, a fresh token or ``None`` where an
    unexpired claim holds the key (or the key came earlier in ``keys``).
    Validates every key before writing anything.
    """
    checked = _validated_keys(keys)
    validate_seconds(window_seconds, name="window_seconds")
    alias = resolve_alias(using)
    tokens = _claim_many(alias, list(dict.fromkeys(checked)), window_seconds)
    return _by_position(checked, tokens)


def _by_position(keys: Sequence[str], tokens: dict[str, str]) -> list[str | None]:
    seen: set[str] = set()
    out: list[str | None] = []
    for key in keys:
        out.append(tokens.get(key) if key not in seen else None)
        seen.add(key)
    return out


def enqueue_claimed_many(
    queue: Any,
    items: Iterable[tuple[str, Any]],
    *,
    window_seconds: float,
    using: str | None = None,
) -> list[str | None]:
    """Sends each ``(key, task)`` of ``items`` under a fresh claim of its key.

    Returns, position by position, the claim token or ``None`` (nothing
    sent) where a claim holds the key. Bodies are the envelopes
    :func:`~astral_taskclaim.claims.enqueue_claimed` sends, in ``items``
    order, through ``queue.send_many`` in batches of
    ``queue.max_batch_size``.

    With a transactional queue (the PostgreSQL queue) claims and messages
    commit together, in one transaction (a savepoint inside the caller's):
    a failed send leaves neither. With another queue the claims commit
    first, outside any transaction (``TransactionManagementError`` inside
    one, as for ``enqueue_claimed``); a failed ``send_many`` releases the
    claims of every task not sent yet and re-raises, batches already sent
    keep theirs.
    """
    if not callable(getattr(queue, "send_many", None)):
        raise TypeError(f"queue must have a send_many(bodies) method, got {type(queue).__name__}")
    pairs = _validated_items(items)
    validate_seconds(window_seconds, name="window_seconds")
    alias = resolve_alias(using)
    connection = connections[alias]
    keys = [key for key, _ in pairs]
    size = _batch_size(queue)
    if _sends_in(queue, alias):
        return _enqueue_in_database(queue, alias, pairs, window_seconds)
    if getattr(queue, "transactional", False) is True:
        with transaction.atomic(using=alias):
            tokens = _claim_many(alias, list(dict.fromkeys(keys)), window_seconds)
            claimed = _claimed(pairs, tokens, window_seconds)
            for start in range(0, len(claimed), size):
                queue.send_many([body for _, body in claimed[start : start + size]])
        return _by_position(keys, tokens)
    if in_transaction(connection):
        raise transaction.TransactionManagementError(
            f"enqueue_claimed_many() with the non-transactional queue {type(queue).__name__} "
            "cannot run inside a transaction: the claims must commit before the send. "
            "Call it outside atomic(), or from transaction.on_commit()."
        )
    tokens = _claim_many(alias, list(dict.fromkeys(keys)), window_seconds)
    claimed = _claimed(pairs, tokens, window_seconds)
    for start in range(0, len(claimed), size):
        try:
            queue.send_many([body for _, body in claimed[start : start + size]])
        except Exception:
            _release_unsent(alias, claimed[start:], queue)
            raise
    return _by_position(keys, tokens)


def _sends_in(queue: Any, alias: str) -> bool:
    """Whether ``queue`` is a PostgreSQL queue in the claims' database,
    whose messages one statement can insert with their claims."""
    from .queues.postgres import PostgresQueue

    return isinstance(queue, PostgresQueue) and queue.database == alias


def _enqueue_in_database(
    queue: Any, alias: str, pairs: Sequence[tuple[str, Any]], window_seconds: float
) -> list[str | None]:
    """Claims and messages in one statement (``bulk_enqueue.sql``); tokens
    are drawn here so each body is encoded, and checked, before it runs."""
    problems = [m for m in queue.check() if m.is_serious()]
    if problems:
        raise ImproperlyConfigured(f"queue {queue.alias!r}: {problems[0].msg}")
    first: dict[str, tuple[str, str]] = {}
    for key, task in pairs:
        if key not in first:
            token = str(uuid.uuid4())
            body = queue.encode(envelope(key, token, window_seconds, task)).decode("utf-8")
            first[key] = (token, body)
    keys = list(first)
    params = {
        "keys": keys,
        "tokens": [token for token, _ in first.values()],
        "bodies": [body for _, body in first.values()],
        "seconds": float(window_seconds),
        "queue": queue.queue_name,
    }
    with bound_cursor(alias) as cursor:
        cursor.execute(sqlfiles.read("taskclaim/bulk_enqueue.sql"), params, prepare=True)
        claimed = {key for (key,) in cursor.fetchall()}
    return _by_position([key for key, _ in pairs], {k: first[k][0] for k in claimed})


def _validated_items(items: object) -> list[tuple[str, Any]]:
    if isinstance(items, str | bytes) or not isinstance(items, Iterable):
        raise TypeError(f"items must be a list of (key, task) pairs, got {type(items).__name__}")
    pairs: list[tuple[str, Any]] = []
    for index, item in enumerate(items):
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise TypeError(f"items[{index}] must be a (key, task) pair, got {item!r:.80}")
        key, task = item
        validate_key(key, name=f"items[{index}] key")
        validate_task(task, name=f"items[{index}] task")
        pairs.append((key, task))
    return pairs


def _batch_size(queue: Any) -> int:
    size = getattr(queue, "max_batch_size", 100)
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 100


def _claimed(
    pairs: Sequence[tuple[str, Any]], tokens: dict[str, str], window_seconds: float
) -> list[tuple[str, dict[str, Any]]]:
    """``(key, body)`` of each pair whose key this call claimed, first
    occurrence only, in ``pairs`` order."""
    seen: set[str] = set()
    out: list[tuple[str, dict[str, Any]]] = []
    for key, task in pairs:
        token = tokens.get(key)
        if token is not None and key not in seen:
            out.append((key, envelope(key, token, window_seconds, task)))
        seen.add(key)
    return out


def _release_unsent(alias: str, unsent: Sequence[tuple[str, dict[str, Any]]], queue: Any) -> None:
    """Frees the claims of tasks a failed send left unsent (only where
    their token still holds the key); a failure here is logged."""
    keys = [key for key, _ in unsent]
    tokens = [body["claim"] for _, body in unsent]
    try:
        with connections[alias].cursor() as cursor:
            cursor.execute(
                sqlfiles.read("taskclaim/release_many.sql"), {"keys": keys, "tokens": tokens}
            )
    except Exception:
        logger.error(
            "%d tasks: send failed, then releasing their claims failed; "
            "keys claimed for the window",
            len(keys),
            exc_info=True,
            extra={
                "event": "queue.claim_release_failed",
                "queue": getattr(queue, "name", None),
                "keys": keys[:20],
            },
        )
        discard_broken_connection(connections[alias])
