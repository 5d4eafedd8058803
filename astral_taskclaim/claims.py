"""Claims on task keys, and sending a task under a fresh claim.

A claim reserves a task key (``"project:42"``) for a window of seconds in
``taskclaim.claim``. While it lasts, claiming the key again returns
``None``: triggers inside the window coalesce into the one queued task.

Every function validates its arguments before touching the database and
raises ``TypeError`` or ``ValueError`` naming the bad argument (the rules
are in :mod:`~astral_taskclaim.validation`, and for tokens and tasks in
:mod:`~astral_taskclaim.envelope`, which also defines the message body).

Outside a transaction each claim write commits on its own. Failures of the
release that follows a failed send are logged on the ``astral_taskclaim.claims``
logger with ``extra={"event": "queue.claim_release_failed", "queue": ..., "key": ...}``.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from django.db import DatabaseError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from . import statements
from .envelope import PLACEHOLDER_TOKEN, encode_json, message_body, validate_token
from .logtext import printable
from .redaction import redacting_filter
from .validation import (
    check_configured,
    check_encodes,
    validate_key,
    validate_seconds,
    validate_window,
)

if TYPE_CHECKING:
    from .queues.postgres import PostgresQueue

logger = logging.getLogger(__name__)
logger.addFilter(redacting_filter)


class Sender(Protocol):
    """What :func:`enqueue_claimed` needs of a queue: ``send(body)``."""

    def send(self, body: Any, /) -> object:
        """Sends one JSON-serialisable message body."""


def resolve_alias(using: object) -> str:
    """The database alias to write claims on: ``using`` or the configured one."""
    if using is None:
        return statements.configured_alias()
    if not isinstance(using, str) or using not in connections.settings:
        raise ValueError(f"using must name an entry of DATABASES, got {using!r}")
    return using


def in_transaction(connection: BaseDatabaseWrapper) -> bool:
    """Whether the caller holds a transaction open on ``connection``.

    As for ``atomic(durable=True)``, the blocks Django's ``TestCase`` wraps
    every test in do not count: inside them a test behaves like code run
    outside any transaction (nothing commits, but nothing else differs).
    Inside an atomic block this asks Django's own durability check, which
    knows those blocks, with an empty block that sends no query.
    """
    if not connection.in_atomic_block:
        return not connection.get_autocommit()
    try:
        with transaction.atomic(using=connection.alias, savepoint=False, durable=True):
            return False
    except RuntimeError:  # "A durable atomic block cannot be nested ..."
        return True


def claim_task(key: str, *, window_seconds: float, using: str | None = None) -> str | None:
    """Claims ``key`` for ``window_seconds``.

    Returns a fresh token (a UUID string), or ``None`` while an unexpired
    claim holds the key. An expired claim is replaced.
    """
    validate_key(key)
    validate_window(window_seconds)
    alias = resolve_alias(using)
    # A float always, so one prepared statement serves int and float windows.
    params = {"key": key, "seconds": float(window_seconds)}
    rows = statements.run(alias, "taskclaim/claim.sql", params)
    token: str | None = rows[0][0] if rows else None
    return token


def hold_task(
    key: str,
    token: str,
    *,
    delay_seconds: float,
    window_seconds: float,
    using: str | None = None,
) -> None:
    """Keeps ``key`` claimed by ``token`` through a retry due in
    ``delay_seconds``, then ``window_seconds`` more.

    A freed (deleted) key is claimed again with the same token; a key now
    held by another token, a later claim, is left alone.
    """
    validate_key(key)
    token = validate_token(token)
    validate_seconds(delay_seconds, name="delay_seconds")
    validate_seconds(window_seconds, name="window_seconds")
    alias = resolve_alias(using)
    held = float(delay_seconds + window_seconds)
    statements.run(alias, "taskclaim/hold.sql", {"key": key, "token": token, "seconds": held})


def release_task(key: str, token: str, *, using: str | None = None) -> None:
    """Frees ``key`` if ``token`` still holds it; a later claim stays."""
    validate_key(key)
    token = validate_token(token)
    alias = resolve_alias(using)
    statements.run(alias, "taskclaim/release.sql", {"key": key, "token": token})


def enqueue_claimed(
    queue: Sender,
    key: str,
    task: Any,
    *,
    window_seconds: float,
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

    On the PostgreSQL queue in the claims' database, claim and message go in
    one statement (``taskclaim/enqueue.sql``) instead: they commit together,
    so no failure can leave a claim without its message, and a held key
    costs one read-only round trip.

    Inside ``transaction.atomic()`` only a queue whose ``transactional``
    attribute is true (one that writes its messages through the same
    database connection; a ``database`` attribute, if any, must be the
    claims' alias) is accepted: claim and message then commit or roll
    back together, and a failed send rolls the claim back to a savepoint.
    Any other queue raises ``TransactionManagementError`` before claiming;
    use ``transaction.on_commit()`` to enqueue after the commit instead.
    """
    validate_key(key)
    validate_window(window_seconds)
    encode_json(task, name="task")
    if not callable(getattr(queue, "send", None)):
        raise TypeError(f"queue must have a send(body) method, got {type(queue).__name__}")
    alias = resolve_alias(using)
    connection = connections[alias]
    check_configured(queue)
    one_statement = _in_database_message(queue, alias, key, window_seconds, task)
    if one_statement is None:
        check_encodes(queue, [message_body(key, PLACEHOLDER_TOKEN, window_seconds, task)])
    if in_transaction(connection):
        if getattr(queue, "transactional", False) is not True:
            raise transaction.TransactionManagementError(
                f"enqueue_claimed() with the non-transactional queue {_queue_name(queue)!r} "
                "cannot run inside a transaction: the claim must commit before the send. "
                "Call it outside atomic(), or from transaction.on_commit()."
            )
        queue_alias = getattr(queue, "database", alias)
        if queue_alias != alias:
            raise transaction.TransactionManagementError(
                f"enqueue_claimed(): queue {_queue_name(queue)!r} sends through database "
                f"{queue_alias!r}, claims go to {alias!r}; inside a transaction they "
                "could not commit together."
            )
        # A savepoint, so a failed send takes the claim back with it and
        # leaves the caller's transaction usable.
        with transaction.atomic(using=alias):
            if one_statement is not None:
                return _claim_and_queue(alias, key, window_seconds, one_statement)
            token = claim_task(key, window_seconds=window_seconds, using=alias)
            if token is not None:
                queue.send(message_body(key, token, window_seconds, task))
        return token

    if one_statement is not None:
        try:
            return _claim_and_queue(alias, key, window_seconds, one_statement)
        except Exception:
            discard_broken_connection(connection)
            raise
    token = claim_task(key, window_seconds=window_seconds, using=alias)
    if token is None:
        return None
    try:
        queue.send(message_body(key, token, window_seconds, task))
    except Exception:
        try:
            release_task(key, token, using=alias)
        except Exception:
            logger.error(
                "task %s: send failed, then releasing its claim failed; key claimed for the window",
                printable(key),
                exc_info=True,
                extra={
                    "event": "queue.claim_release_failed",
                    "queue": _queue_name(queue),
                    "key": key,
                },
            )
            discard_broken_connection(connection)
        raise
    return token


def sends_in_database(queue: object, alias: str, method: str) -> TypeGuard[PostgresQueue]:
    """Whether ``queue`` is a PostgreSQL queue in database ``alias`` whose
    ``method`` (``"send"`` or ``"send_many"``) is the stock one, so a
    statement can insert its messages together with their claims. A
    subclass that overrides the method keeps it: it is called as usual."""
    from .queues.postgres import PostgresQueue

    return (
        isinstance(queue, PostgresQueue)
        and queue.database == alias
        and getattr(type(queue), method) is getattr(PostgresQueue, method)
    )


def _in_database_message(
    queue: object, alias: str, key: str, window_seconds: float, task: Any
) -> dict[str, str] | None:
    """The queue name, a fresh token and the encoded body for
    ``taskclaim/enqueue.sql``, or ``None`` when the queue is not the stock
    PostgreSQL queue of ``alias``. A body the queue rejects raises here,
    before the statement, whether or not the key is held."""
    if not sends_in_database(queue, alias, "send"):
        return None
    token = str(uuid.uuid4())
    body = queue.encode(message_body(key, token, window_seconds, task)).decode("utf-8")
    return {"queue": queue.queue_name, "token": token, "body": body}


def _claim_and_queue(
    alias: str, key: str, window_seconds: float, message: dict[str, str]
) -> str | None:
    params = {"key": key, "seconds": float(window_seconds), **message}
    rows = statements.run(alias, "taskclaim/enqueue.sql", params)
    return message["token"] if rows else None


def discard_broken_connection(connection: BaseDatabaseWrapper) -> None:
    """Closes ``connection`` after a failed write if it no longer works (a
    terminated backend), so the next claim write reconnects. Never inside a
    transaction, whose state would be lost."""
    if connection.in_atomic_block:
        return
    try:
        connection.close_if_unusable_or_obsolete()
    except DatabaseError:
        logger.debug("closing a broken connection failed", exc_info=True)


def _queue_name(queue: object) -> str | None:
    name = getattr(queue, "name", None)
    return name if isinstance(name, str) else None
