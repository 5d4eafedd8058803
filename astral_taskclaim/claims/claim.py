"""Claims on task keys, and sending a task under a fresh claim.

A claim reserves a task key (``"project:42"``) for a window of seconds; while
it lasts, claiming the key again returns ``None``, so triggers inside the
window coalesce into the one queued task. Arguments are checked
(:mod:`~astral_taskclaim.core.validation`) before the database is touched.
A failed release after a failed send is logged (``queue.claim_release_failed``).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.db import connections, transaction

from astral_taskclaim.claims.trailing import enqueue_trailing, trailing_queue
from astral_taskclaim.claims.writing import (
    Sender,
    claim_params,
    discard_broken_connection,
    hold_params,
    log_claim_left,
    plan,
    release_params,
    resolve_alias,
    run_in_savepoint,
)
from astral_taskclaim.core.envelope import PLACEHOLDER_TOKEN, encode_json, message_body
from astral_taskclaim.core.redaction import redacting_filter
from astral_taskclaim.core.tracing import traced_send
from astral_taskclaim.core.validation import (
    TrailingOption,
    validate_key,
    validate_trailing,
    validate_window,
)
from astral_taskclaim.db import statements

logger = logging.getLogger(__name__)
logger.addFilter(redacting_filter)


def claim_task(key: str, *, window_seconds: float, using: str | None = None) -> str | None:
    """Claims ``key`` for ``window_seconds``.

    Returns a fresh token (a UUID string), or ``None`` while an unexpired
    claim holds the key. An expired claim is replaced.
    """
    params = claim_params(key, window_seconds)
    rows = statements.run(resolve_alias(using), "taskclaim/claim.sql", params)
    token: str | None = rows[0][0] if rows else None
    return token


def hold_task(
    key: str, token: str, *, delay_seconds: float, window_seconds: float, using: str | None = None
) -> None:
    """Keeps ``key`` claimed by ``token`` through a retry due in
    ``delay_seconds``, then ``window_seconds`` more.

    A freed (deleted) key is claimed again with the same token; a key now
    held by another token, a later claim, is left alone.
    """
    params = hold_params(key, token, delay_seconds, window_seconds)
    statements.run(resolve_alias(using), "taskclaim/hold.sql", params)


def release_task(key: str, token: str, *, using: str | None = None) -> None:
    """Frees ``key`` if ``token`` still holds it; a later claim stays."""
    params = release_params(key, token)
    statements.run(resolve_alias(using), "taskclaim/release.sql", params)


@traced_send
def enqueue_claimed(
    queue: Sender,
    key: str,
    task: Any,
    *,
    window_seconds: float,
    trailing: TrailingOption = None,
    using: str | None = None,
) -> str | None:
    """Sends ``task`` to ``queue`` under a fresh claim of ``key``.

    Returns the claim token, or ``None`` (and sends nothing) while a claim
    holds the key. The body sent is
    ``{"key": key, "claim": token, "windowSeconds": window_seconds, "task": task}``.

    Bad input raises before anything is written, whether the key is free
    or held: ``ImproperlyConfigured`` naming the queue for serious
    configuration errors, and the queue's ``encode`` error (naming the
    queue and the limit) for a body too big or otherwise unsendable.

    Outside a transaction the claim commits before the send. A failed send
    releases the claim and re-raises the send's error; if that release fails
    too, it is logged (``queue.claim_release_failed``) and the key stays
    claimed for the window.

    A queue whose messages live in the claims' database (the PostgreSQL
    queue, a remote queue with an outbox) writes claim and message in one
    statement instead (its ``claimed_insert``): they commit together, so
    no failure can leave a claim without its message, and a held key costs
    one read-only round trip.

    Inside ``transaction.atomic()`` only such a queue, or one whose
    ``transactional`` attribute is true (it writes its messages through the
    same database connection; a ``database`` attribute, if any, must be the
    claims' alias) is accepted: claim and message then commit or roll back
    together, and a failed send rolls the claim back to a savepoint. Any
    other queue raises ``TransactionManagementError`` before claiming; use
    ``transaction.on_commit()`` to enqueue after the commit instead.

    ``trailing`` (``"latest"``, ``"first"``; ``True`` is ``"latest"``): a
    trigger that finds the key claimed is not dropped but becomes the key's
    one pending follow-up run, due when the claim ends (see
    :mod:`~astral_taskclaim.claims.trailing` and :doc:`/flow-control`). The
    return value is then an :class:`~astral_taskclaim.claims.trailing.Enqueued`
    token, never ``None``, and says what happened (``.outcome``). The queue
    must be a configured queue (one that can delay a message).
    """
    validate_key(key)
    validate_window(window_seconds)
    mode = validate_trailing(trailing)
    task_json = encode_json(task, name="task")
    if not callable(getattr(queue, "send", None)):
        raise TypeError(f"queue must have a send(body) method, got {type(queue).__name__}")
    sender = trailing_queue(queue) if mode is not None else None
    alias = resolve_alias(using)
    placeholder = message_body(key, PLACEHOLDER_TOKEN, window_seconds, task)
    how = plan(queue, alias, function="enqueue_claimed", placeholders=[placeholder])
    if mode is not None and sender is not None:
        return enqueue_trailing(
            sender,
            key,
            task,
            task_json,
            window_seconds=window_seconds,
            trailing=mode,
            alias=alias,
            joins=how.joins,
        )
    if how.insert is not None:
        fresh = str(uuid.uuid4())
        body = how.insert.writer(window_seconds)(key, fresh, task, task_json)
        params = how.insert.one_params(key, fresh, body, window_seconds)
        return fresh if run_in_savepoint(alias, how.insert.one, params) else None
    if how.joins:
        # A transaction (a savepoint inside the caller's), so a failed send
        # takes the claim back with it and leaves the caller's work usable.
        with transaction.atomic(using=alias):
            joined = claim_task(key, window_seconds=window_seconds, using=alias)
            if joined is not None:
                queue.send(message_body(key, joined, window_seconds, task))
        return joined
    token = claim_task(key, window_seconds=window_seconds, using=alias)
    if token is None:
        return None
    try:
        queue.send(message_body(key, token, window_seconds, task))
    except Exception:
        try:
            release_task(key, token, using=alias)
        except Exception:
            log_claim_left(logger, queue, key)
            discard_broken_connection(connections[alias])
        raise
    return token
