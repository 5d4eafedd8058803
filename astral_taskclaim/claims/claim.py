"""Claims on task keys, and sending a task under a fresh claim.

A claim reserves a task key (``"project:42"``) for a window of seconds in
``taskclaim.claim``. While it lasts, claiming the key again returns
``None``: triggers inside the window coalesce into the one queued task.

Every function validates its arguments before touching the database and
raises ``TypeError`` or ``ValueError`` naming the bad argument (the rules
are in :mod:`~astral_taskclaim.core.validation`, and for tokens and tasks in
:mod:`~astral_taskclaim.core.envelope`, which also defines the message body).

Outside a transaction each claim write commits on its own. Failures of the
release that follows a failed send are logged on the ``astral_taskclaim.claims.claim``
logger with ``extra={"event": "queue.claim_release_failed", "queue": ..., "key": ...}``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from django.db import DatabaseError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from astral_taskclaim.core.envelope import (
    PLACEHOLDER_TOKEN,
    encode_json,
    message_body,
    validate_token,
)
from astral_taskclaim.core.logtext import printable
from astral_taskclaim.core.redaction import redacting_filter
from astral_taskclaim.core.validation import (
    check_configured,
    check_encodes,
    validate_key,
    validate_seconds,
    validate_window,
)
from astral_taskclaim.db import statements
from astral_taskclaim.db.connections import savepoint_if_in_atomic
from astral_taskclaim.queues.base import BaseQueue, ClaimStatement

__all__ = [
    "Plan",
    "Sender",
    "claim_params",
    "claim_task",
    "discard_broken_connection",
    "enqueue_claimed",
    "hold_params",
    "hold_task",
    "in_transaction",
    "log_release_failure",
    "plan",
    "release_params",
    "release_task",
    "resolve_alias",
    "run_in_savepoint",
]

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
    params = claim_params(key, window_seconds)
    rows = statements.run(resolve_alias(using), "taskclaim/claim.sql", params)
    token: str | None = rows[0][0] if rows else None
    return token


def claim_params(key: str, window_seconds: float) -> dict[str, Any]:
    """The parameters of ``taskclaim/claim.sql`` (sync and async), checked."""
    validate_key(key)
    validate_window(window_seconds)
    # A float always, so one prepared statement serves int and float windows.
    return {"key": key, "seconds": float(window_seconds)}


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


def hold_params(
    key: str, token: str, delay_seconds: float, window_seconds: float
) -> dict[str, Any]:
    """The parameters of ``taskclaim/hold.sql`` (sync and async), checked."""
    params = release_params(key, token)
    validate_seconds(delay_seconds, name="delay_seconds")
    validate_seconds(window_seconds, name="window_seconds")
    return {**params, "seconds": float(delay_seconds + window_seconds)}


def release_task(key: str, token: str, *, using: str | None = None) -> None:
    """Frees ``key`` if ``token`` still holds it; a later claim stays."""
    params = release_params(key, token)
    statements.run(resolve_alias(using), "taskclaim/release.sql", params)


def release_params(key: str, token: str) -> dict[str, Any]:
    """The parameters of ``taskclaim/release.sql`` (sync and async), checked."""
    validate_key(key)
    return {"key": key, "token": validate_token(token)}


@dataclass(frozen=True)
class Plan:
    """How one enqueue call delivers its tasks, as :func:`plan` decided.

    ``statement``: the queue's statement writing claims and messages
    together, or ``None`` (claim, then ``send``). ``joins``: the queue's
    sends go through the connection of ``alias``, so claims and messages
    can commit in one transaction.
    """

    alias: str
    statement: ClaimStatement | None
    joins: bool


def plan(
    queue: object,
    alias: str,
    *,
    function: str,
    placeholders: Iterable[Any],
    outside_transaction: bool = False,
) -> Plan:
    """The rules every claimed enqueue follows (``enqueue_claimed``, its
    bulk and async forms), applied before anything is written.

    The queue's configuration is checked (``ImproperlyConfigured``). A
    queue with a :meth:`~astral_taskclaim.queues.base.BaseQueue.claim_statement`
    for ``alias`` uses it; any other has ``placeholders`` (bodies with a
    stand-in token) encoded, so a body it would refuse raises before a
    claim. Inside a transaction on ``alias`` only a queue whose messages
    join it is accepted; any other raises ``TransactionManagementError``
    naming ``function``; ``outside_transaction`` says the caller made sure
    there is none (async code, which cannot ask a connection).
    """
    check_configured(queue)
    statement = queue.claim_statement(alias) if isinstance(queue, BaseQueue) else None
    if statement is None:
        check_encodes(queue, placeholders)
    database = getattr(queue, "database", alias)
    joins = statement is not None or (
        getattr(queue, "transactional", False) is True and database == alias
    )
    if not joins and not outside_transaction and in_transaction(connections[alias]):
        name = getattr(queue, "name", None) or type(queue).__name__
        if getattr(queue, "transactional", False) is not True:
            raise transaction.TransactionManagementError(
                f"{function}() with the non-transactional queue {name!r} cannot run inside a "
                "transaction: the claim must commit before the send. Call it outside atomic(), "
                "or from transaction.on_commit()."
            )
        raise transaction.TransactionManagementError(
            f"{function}(): queue {name!r} sends through database {database!r}, claims go to "
            f"{alias!r}; inside a transaction they could not commit together."
        )
    return Plan(alias, statement, joins)


def enqueue_claimed(
    queue: Sender, key: str, task: Any, *, window_seconds: float, using: str | None = None
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
    statement instead (its ``claim_statement``): they commit together, so
    no failure can leave a claim without its message, and a held key costs
    one read-only round trip.

    Inside ``transaction.atomic()`` only such a queue, or one whose
    ``transactional`` attribute is true (it writes its messages through the
    same database connection; a ``database`` attribute, if any, must be the
    claims' alias) is accepted: claim and message then commit or roll back
    together, and a failed send rolls the claim back to a savepoint. Any
    other queue raises ``TransactionManagementError`` before claiming; use
    ``transaction.on_commit()`` to enqueue after the commit instead.
    """
    validate_key(key)
    validate_window(window_seconds)
    task_json = encode_json(task, name="task")
    if not callable(getattr(queue, "send", None)):
        raise TypeError(f"queue must have a send(body) method, got {type(queue).__name__}")
    alias = resolve_alias(using)
    placeholder = message_body(key, PLACEHOLDER_TOKEN, window_seconds, task)
    how = plan(queue, alias, function="enqueue_claimed", placeholders=[placeholder])
    if how.statement is not None:
        assert isinstance(queue, BaseQueue)  # only a BaseQueue has a statement
        fresh = str(uuid.uuid4())
        body = queue.text_writer(window_seconds)(key, fresh, task, task_json)
        params = {"key": key, "seconds": float(window_seconds), "token": fresh, "body": body}
        rows = run_in_savepoint(alias, how.statement.one, {**how.statement.params, **params})
        return fresh if rows else None
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
            log_release_failure(
                logger,
                queue,
                "task %s: send failed, then releasing its claim failed; key claimed for the window",
                printable(key),
                key=key,
            )
            discard_broken_connection(connections[alias])
        raise
    return token


def run_in_savepoint(alias: str, path: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Runs a claim statement; inside an atomic block in a savepoint, so a
    failure leaves the caller's transaction usable, and outside one
    dropping a connection the failure broke."""
    connection = connections[alias]
    try:
        with savepoint_if_in_atomic(alias):
            return statements.run(alias, path, params)
    except Exception:
        discard_broken_connection(connection)
        raise


def log_release_failure(
    log: logging.Logger, queue: Any, message: str, *args: object, **fields: object
) -> None:
    """Logs ``message`` % ``args`` on ``log`` as event
    ``queue.claim_release_failed`` with ``fields``: a send failed and freeing
    the claims it left unsent failed too. Called in the ``except`` block, so
    the record carries the release's traceback."""
    extra = {"event": "queue.claim_release_failed", "queue": getattr(queue, "name", None)}
    log.error(message, *args, exc_info=True, extra={**extra, **fields})


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
