"""Internal: what the package's claim writes share (none of it public API).

The claims database alias, whether the caller holds a transaction there,
the checked parameters of the claim, hold and release statements, and
:func:`plan`, the rules every claimed enqueue follows before writing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from django.db import DatabaseError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from astral_taskclaim.core.envelope import validate_token
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
from astral_taskclaim.queues.base import BaseQueue, ClaimedInsert

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


def async_write_alias(using: object, function: str) -> str:
    """The database alias (``using``, or ``TASKCLAIM_DATABASE``) on which
    the async entry point ``function`` (e.g. ``"aenqueue"``) writes through
    connections of its own; ``TransactionManagementError`` naming its sync
    twin where the current context holds a transaction open on it (the call
    would commit behind it)."""
    alias = resolve_alias(using)
    connection = connections[alias]
    if connection.in_atomic_block and in_transaction(connection):
        raise transaction.TransactionManagementError(
            f"{function}() commits on a connection of its own and cannot join the "
            f"transaction open on database {alias!r}; inside atomic(), call the sync "
            f"{function.removeprefix('a')}() instead"
        )
    return alias


def claim_params(key: str, window_seconds: float) -> dict[str, Any]:
    """The parameters of ``taskclaim/claim.sql`` (sync and async), checked."""
    validate_key(key)
    validate_window(window_seconds)
    # A float always, so one prepared statement serves int and float windows.
    return {"key": key, "seconds": float(window_seconds)}


def hold_params(
    key: str, token: str, delay_seconds: float, window_seconds: float
) -> dict[str, Any]:
    """The parameters of ``taskclaim/hold.sql`` (sync and async), checked."""
    params = release_params(key, token)
    validate_seconds(delay_seconds, name="delay_seconds")
    validate_seconds(window_seconds, name="window_seconds")
    return {**params, "seconds": float(delay_seconds + window_seconds)}


def release_params(key: str, token: str) -> dict[str, Any]:
    """The parameters of ``taskclaim/release.sql`` (sync and async), checked."""
    validate_key(key)
    return {"key": key, "token": validate_token(token)}


@dataclass(frozen=True)
class _Plan:
    """How one enqueue call delivers its tasks, as :func:`plan` decided.

    ``insert``: the queue's insert of its messages in the statement that
    writes their claims, or ``None`` (claim, then ``send``). ``joins``: the
    queue's sends go through the connection of ``alias``, so claims and
    messages can commit in one transaction.
    """

    alias: str
    insert: ClaimedInsert | None
    joins: bool


def plan(
    queue: object,
    alias: str,
    *,
    function: str,
    placeholders: Iterable[Any],
    outside_transaction: bool = False,
) -> _Plan:
    """The rules every claimed enqueue follows (``enqueue_claimed``, its
    bulk and async forms), applied before anything is written.

    The queue's configuration is checked (``ImproperlyConfigured``). A
    queue with a :meth:`~astral_taskclaim.queues.base.BaseQueue.claimed_insert`
    for ``alias`` uses it; any other has ``placeholders`` (bodies with a
    stand-in token) encoded, so a body it would refuse raises before a
    claim. Inside a transaction on ``alias`` only a queue whose messages
    join it is accepted; any other raises ``TransactionManagementError``
    naming ``function``; ``outside_transaction`` says the caller made sure
    there is none (async code, which cannot ask a connection).
    """
    check_configured(queue)
    insert = queue.claimed_insert(alias) if isinstance(queue, BaseQueue) else None
    if insert is None:
        check_encodes(queue, placeholders)
    database = getattr(queue, "database", alias)
    joins = insert is not None or (
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
    return _Plan(alias, insert, joins)


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


def log_claim_left(log: logging.Logger, queue: Any, key: str) -> None:
    """:func:`log_release_failure` of one key: its send failed, then
    releasing its claim failed, so the key stays claimed for the window."""
    log_release_failure(
        log,
        queue,
        "task %s: send failed, then releasing its claim failed; key claimed for the window",
        printable(key),
        key=key,
    )


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
