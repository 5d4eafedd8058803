"""Claiming many keys, and enqueueing many claimed tasks, in one call.

:func:`claim_tasks` and :func:`enqueue_claimed_many` behave as the single
calls one after the other: a repeated key is claimed (and sent) at its first
position only, later ones get ``None``. Keys are claimed in bytewise order,
so overlapping bulk calls never deadlock. Arrays travel as binary prepared
statement parameters (:mod:`~astral_taskclaim.db.statements`).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from typing import Any

from django.db import DatabaseError, connections, transaction

from astral_taskclaim.claims.trailing import (
    Enqueued,
    enqueue_trailing,
    trailing_queue,
    trailing_writer,
)
from astral_taskclaim.claims.writing import (
    discard_broken_connection,
    log_release_failure,
    plan,
    resolve_alias,
    run_in_savepoint,
)
from astral_taskclaim.core.envelope import (
    FOLLOW_UP_FIELD,
    PLACEHOLDER_TOKEN,
    TRAILING_FIELD,
    encode_json,
    message_body,
)
from astral_taskclaim.core.redaction import redacting_filter
from astral_taskclaim.core.tracing import traced_send
from astral_taskclaim.core.validation import (
    Debounce,
    TrailingOption,
    validate_key,
    validate_trailing,
    validate_window,
)
from astral_taskclaim.db import statements
from astral_taskclaim.queues.base import BaseQueue, PartlySentError, TextWriter

logger = logging.getLogger(__name__)
logger.addFilter(redacting_filter)


def _validated_keys(keys: object) -> list[str]:
    if isinstance(keys, str | bytes) or not isinstance(keys, Iterable):
        raise TypeError(f"keys must be a list of str, got {type(keys).__name__}")
    return [validate_key(key, name=f"keys[{index}]") for index, key in enumerate(keys)]


#: SQLSTATEs of a ``claim_many.sql`` that lost a race to another session
#: (``unique_violation`` on a key inserted after its snapshot; and
#: ``deadlock_detected``, which its bytewise order should rule out): the
#: upsert then does the work.
_LOST_RACE = frozenset({"23505", "40P01"})


def _claim_many(alias: str, keys: Sequence[str], window_seconds: float) -> dict[str, str]:
    """Fresh tokens of the keys this statement claimed; ``keys`` distinct.

    Outside a transaction the cheaper ``claim_many.sql`` goes first (plain
    inserts for absent keys); the upsert runs only when some key has an
    expired claim to replace or the plain inserts lost a race. Inside a
    transaction, where a failed statement would abort the caller's work,
    the upsert runs at once.
    """
    if not keys:
        return {}
    params = {"keys": list(keys), "seconds": float(window_seconds)}
    connection = connections[alias]
    if connection.in_atomic_block or not connection.get_autocommit():
        return dict(statements.run(alias, "taskclaim/claim_many_upsert.sql", params))
    try:
        rows = statements.run(alias, "taskclaim/claim_many.sql", params)
    except DatabaseError as error:
        if getattr(error.__cause__, "sqlstate", None) not in _LOST_RACE:
            raise
        logger.debug(
            "bulk claim of %d keys raced another session; claiming them by upsert",
            len(keys),
            extra={"event": "claims.bulk_claim_raced", "keys": list(keys[:20])},
        )
    else:
        if rows != [(None, None)]:
            return dict(rows)
    return dict(statements.run(alias, "taskclaim/claim_many_upsert.sql", params))


def claim_tasks(
    keys: Iterable[str], *, window_seconds: float, using: str | None = None
) -> list[str | None]:
    """Claims every key of ``keys`` for ``window_seconds`` in one statement.

    Returns, position by position, a fresh token or ``None`` where an
    unexpired claim holds the key (or the key came earlier in ``keys``).
    Validates every key before writing anything.
    """
    checked = _validated_keys(keys)
    validate_window(window_seconds)
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


@traced_send
def enqueue_claimed_many(
    queue: Any,
    items: Iterable[tuple[str, Any]],
    *,
    window_seconds: float,
    trailing: TrailingOption = None,
    using: str | None = None,
) -> list[str | None]:
    """Sends each ``(key, task)`` of ``items`` under a fresh claim of its key.

    Returns, position by position, the claim token or ``None`` (nothing
    sent) where a claim holds the key. Bodies are the envelopes
    :func:`~astral_taskclaim.claims.claim.enqueue_claimed` sends, in ``items``
    order, through ``queue.send_many`` in batches of
    ``queue.max_batch_size``.

    The rules are :func:`~astral_taskclaim.claims.claim.enqueue_claimed`'s (both
    follow :func:`~astral_taskclaim.claims.writing.plan`). A queue whose messages
    live in the claims' database (the PostgreSQL queue, a remote queue with
    an outbox) takes a single statement for the whole call. With another
    transactional queue claims and messages commit together, in one
    transaction (a savepoint inside the caller's): a failed send leaves
    neither. With any other queue the claims commit first, outside any
    transaction (``TransactionManagementError`` inside one); a failed
    ``send_many`` releases the claims of every task not sent yet and
    re-raises; tasks already sent keep theirs, those of a batch the
    backend sent in part included (it names the unsent ones in
    :class:`~astral_taskclaim.queues.base.PartlySentError`).

    Every item is checked before anything is written, held keys and
    repeated ones included: ``ImproperlyConfigured`` naming the queue for
    serious configuration errors, and the queue's ``encode`` error (naming
    the queue and the limit) for a body too big or otherwise unsendable.

    ``trailing``: each item as :func:`~astral_taskclaim.claims.claim.enqueue_claimed`
    with ``trailing`` would do it, in order (one transaction where the
    queue's messages join it); each position an
    :class:`~astral_taskclaim.claims.trailing.Enqueued`. On a queue whose
    messages live in the claims' database, ``"latest"`` and ``"first"``
    take one statement for the whole call (a :class:`Debounce` goes item by
    item), every body it may queue checked first.
    """
    if not callable(getattr(queue, "send_many", None)):
        raise TypeError(f"queue must have a send_many(bodies) method, got {type(queue).__name__}")
    pairs, texts = _validated_items(items)
    validate_window(window_seconds)
    mode = validate_trailing(trailing)
    alias = resolve_alias(using)
    keys = [key for key, _ in pairs]
    size = _batch_size(queue)
    placeholders = (message_body(k, PLACEHOLDER_TOKEN, window_seconds, t) for k, t in pairs)
    how = plan(queue, alias, function="enqueue_claimed_many", placeholders=placeholders)
    if mode is not None:
        sender = trailing_queue(queue)
        path = how.insert.trail_many if how.insert else None
        if how.insert and path and not isinstance(mode, Debounce):
            params = {**how.insert.params, "latest": mode == "latest"}
            return _trail_many(sender, path, params, pairs, texts, window_seconds, alias)
        with transaction.atomic(using=alias) if how.joins else nullcontext():
            enqueue = functools.partial(
                enqueue_trailing, window_seconds=window_seconds, alias=alias, joins=how.joins
            )
            both = zip(pairs, texts, strict=True)
            return [enqueue(sender, k, t, text, trailing=mode) for (k, t), text in both]
    if how.insert is not None:
        bodies = _statement_bodies(how.insert.writer(window_seconds), pairs, texts)
        fresh = [token for token, _ in bodies.values()]
        encoded = [body for _, body in bodies.values()]
        params = how.insert.many_params(list(bodies), fresh, encoded, window_seconds)
        rows = run_in_savepoint(alias, how.insert.many, params)
        return _by_position(keys, {key: bodies[key][0] for (key,) in rows})
    if how.joins:
        with transaction.atomic(using=alias):
            tokens = _claim_many(alias, list(dict.fromkeys(keys)), window_seconds)
            claimed = _claimed(pairs, tokens, window_seconds)
            for start in range(0, len(claimed), size):
                queue.send_many([body for _, body in claimed[start : start + size]])
        return _by_position(keys, tokens)
    tokens = _claim_many(alias, list(dict.fromkeys(keys)), window_seconds)
    claimed = _claimed(pairs, tokens, window_seconds)
    for start in range(0, len(claimed), size):
        batch = claimed[start : start + size]
        try:
            queue.send_many([body for _, body in batch])
        except Exception as error:
            # A backend that split the batch names the bodies it did not send.
            positions = error.unsent if isinstance(error, PartlySentError) else range(len(batch))
            unsent = [batch[i] for i in positions]
            _release_unsent(alias, unsent + claimed[start + size :], queue)
            raise
    return _by_position(keys, tokens)


def _trail_many(
    queue: BaseQueue,
    path: str,
    params: dict[str, Any],
    pairs: Sequence[tuple[str, Any]],
    texts: Sequence[str],
    window_seconds: float,
    alias: str,
) -> list[str | None]:
    """The trailing items in one statement (the queue's ``trail_many``
    ``path``, with ``params``): each with a fresh token and the bodies its
    place may queue (a key's first item: sent now or its follow-up's; its
    second: its follow-up's)."""
    if not pairs:
        return []
    write = trailing_writer(queue, window_seconds)
    tokens = _fresh_tokens(len(pairs))
    nth: dict[str, int] = {}
    sent: list[str | None] = []
    follow: list[str | None] = []
    for (key, task), text, token in zip(pairs, texts, tokens, strict=True):
        place = nth[key] = nth.get(key, 0) + 1
        sent.append(write(key, token, task, text, TRAILING_FIELD) if place == 1 else None)
        follow.append(write(key, token, task, text, FOLLOW_UP_FIELD) if place <= 2 else None)
    params = {
        **params,
        "keys": [key for key, _ in pairs],
        "tokens": tokens,
        "tasks": list(texts),
        "sent": sent,
        "follow": follow,
        "seconds": float(window_seconds),
        "max_delay": float(queue.max_send_delay_seconds),
    }
    rows = run_in_savepoint(alias, path, params)
    return [Enqueued(token, outcome) for outcome, token in rows]


def _statement_bodies(
    write: TextWriter, pairs: Sequence[tuple[str, Any]], texts: Sequence[str]
) -> dict[str, tuple[str, str]]:
    """Token and encoded body of each distinct key's first task, written by
    ``write`` (the queue's :class:`~astral_taskclaim.queues.base.ClaimedInsert`
    writer); raises the queue's error for any task it would reject (a
    repeated key's too, as the single call would), before anything is written."""
    tokens = iter(_fresh_tokens(len(pairs)))
    first: dict[str, tuple[str, str]] = {}
    for (key, task), text in zip(pairs, texts, strict=True):
        # A repeated key's body is checked with a stand-in of the same length.
        token = PLACEHOLDER_TOKEN if key in first else next(tokens)
        first.setdefault(key, (token, write(key, token, task, text)))
    return first


#: The version-4 variant digit (``10xx``) for each random hex digit.
_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


def _fresh_tokens(count: int) -> list[str]:
    """``count`` random claim tokens: version-4 UUIDs from ``os.urandom``,
    as ``uuid.uuid4()`` draws them, formatted without a ``UUID`` object
    each (a thousand-key call spends less time on them)."""
    data = os.urandom(16 * count).hex()
    out: list[str] = []
    for start in range(0, 32 * count, 32):
        h = data[start : start + 32]
        out.append(f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}")
    return out


def _validated_items(items: object) -> tuple[list[tuple[str, Any]], list[str]]:
    """The ``(key, task)`` pairs and each task's compact JSON."""
    if isinstance(items, str | bytes) or not isinstance(items, Iterable):
        raise TypeError(f"items must be a list of (key, task) pairs, got {type(items).__name__}")
    pairs: list[tuple[str, Any]] = []
    texts: list[str] = []
    for index, item in enumerate(items):
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise TypeError(f"items[{index}] must be a (key, task) pair, got {item!r:.80}")
        key, task = item
        validate_key(key, name=f"items[{index}] key")
        texts.append(encode_json(task, name=f"items[{index}] task"))
        pairs.append((key, task))
    return pairs, texts


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
            out.append((key, message_body(key, token, window_seconds, task)))
        seen.add(key)
    return out


def _release_unsent(alias: str, unsent: Sequence[tuple[str, dict[str, Any]]], queue: Any) -> None:
    """Frees the claims of tasks a failed send left unsent (only where
    their token still holds the key); a failure here is logged."""
    keys = [key for key, _ in unsent]
    tokens = [body["claim"] for _, body in unsent]
    try:
        statements.run(alias, "taskclaim/release_many.sql", {"keys": keys, "tokens": tokens})
    except Exception:
        log_release_failure(
            logger,
            queue,
            "%d tasks: send failed, then releasing their claims failed; "
            "keys claimed for the window",
            len(keys),
            keys=keys[:20],
        )
        discard_broken_connection(connections[alias])
