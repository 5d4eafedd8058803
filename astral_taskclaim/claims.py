"""Claims on task keys, and sending a task under a fresh claim.

A claim reserves a task key (``"project:42"``) for a window of seconds in
``taskclaim.claim``. While it lasts, claiming the key again returns
``None``: triggers inside the window coalesce into the one queued task.

Every function validates its arguments before touching the database and
raises ``TypeError`` or ``ValueError`` naming the bad argument. A key is a
non-empty ``str`` without NUL of at most :data:`MAX_KEY_BYTES` UTF-8 bytes,
so it always fits the primary-key index. Windows and delays are ``int`` or
``float`` seconds, finite, from 0 up to :data:`MAX_SECONDS`.

Outside a transaction each claim write commits on its own. Failures of the
release that follows a failed send are logged on the ``astral_taskclaim.claims``
logger with ``extra={"event": "queue.claim_release_failed", "queue": ..., "key": ...}``.
"""

from __future__ import annotations

import json
import logging
import math
import re
import uuid
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from django.db import DatabaseError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from . import statements

if TYPE_CHECKING:
    from .queues.postgres import PostgresQueue

logger = logging.getLogger(__name__)

#: Longest key, in UTF-8 bytes. A B-tree entry may take about a third of a
#: page (2704 bytes); 1024 leaves room for the rest of the index tuple and
#: for keys that do not compress.
MAX_KEY_BYTES = 1024

#: Longest window or delay, in seconds (about 3,170 years): far past any real
#: window, well inside what PostgreSQL's ``timestamptz`` arithmetic accepts.
MAX_SECONDS = 10**11

#: The JSON encoding of message bodies: compact, UTF-8 text kept as it is
#: (what ``JSON.stringify`` gives a TypeScript producer), strict numbers.
COMPACT_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)

# A claim token as the table stores it: a hyphenated UUID, in either case.
# (Explicit ranges: re.IGNORECASE would also fold some non-ASCII letters.)
TOKEN_PATTERN = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)


class Sender(Protocol):
    """What :func:`enqueue_claimed` needs of a queue: ``send(body)``."""

    def send(self, body: Any, /) -> object:
        """Sends one JSON-serialisable message body."""


def is_token(value: object) -> bool:
    """Whether ``value`` is a claim token string: a hyphenated UUID, either case."""
    return isinstance(value, str) and TOKEN_PATTERN.fullmatch(value) is not None


def validate_key(key: object, *, name: str = "key") -> str:
    """``key`` if it can be a claim key, else ``TypeError``/``ValueError``."""
    if not isinstance(key, str):
        raise TypeError(f"{name} must be a str, got {type(key).__name__}")
    if not key:
        raise ValueError(f"{name} must not be empty")
    if "\x00" in key:
        raise ValueError(f"{name} must not contain NUL characters")
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise ValueError(f"{name} is not valid Unicode text: {error.reason}") from None
    if size > MAX_KEY_BYTES:
        raise ValueError(f"{name} is {size} bytes of UTF-8, over the {MAX_KEY_BYTES}-byte limit")
    return key


def validate_seconds(value: object, *, name: str) -> float:
    """``value`` if it is a finite number of seconds from 0 to :data:`MAX_SECONDS`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be an int or float, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if not 0 <= value <= MAX_SECONDS:
        raise ValueError(f"{name} must be from 0 to {MAX_SECONDS} seconds, got {value!r}")
    return value


def validate_token(token: object, *, name: str = "token") -> str:
    """``token`` as a string if it is a claim token (a UUID)."""
    if isinstance(token, uuid.UUID):
        return str(token)
    if not isinstance(token, str):
        raise TypeError(f"{name} must be a UUID string, got {type(token).__name__}")
    if not is_token(token):
        raise ValueError(f"{name} must be a hyphenated UUID, got {token!r}")
    return token


def validate_task(task: object, *, name: str = "task") -> str:
    """``task`` as compact JSON (the queues' encoding); raises unless it
    encodes as strict JSON (no NaN or Infinity)."""
    try:
        return COMPACT_JSON.encode(task)
    except TypeError as error:
        raise TypeError(f"{name} is not JSON-serialisable: {error}") from None
    except ValueError as error:
        raise ValueError(f"{name} is not JSON-serialisable: {error}") from None


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
    """
    if connection.in_atomic_block:
        return any(
            not getattr(block, "_from_testcase", False) for block in connection.atomic_blocks
        )
    return not connection.get_autocommit()


def claim_task(key: str, *, window_seconds: float, using: str | None = None) -> str | None:
    """Claims ``key`` for ``window_seconds``.

    Returns a fresh token (a UUID string), or ``None`` while an unexpired
    claim holds the key. An expired claim is replaced.
    """
    validate_key(key)
    validate_seconds(window_seconds, name="window_seconds")
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


def wire_seconds(seconds: float) -> float:
    """``seconds`` as JavaScript writes it: a whole float as an int, so that
    ``300.0`` goes on the wire as ``300``, byte for byte what TypeScript sends."""
    if isinstance(seconds, float) and seconds.is_integer():
        return int(seconds)
    return seconds


def envelope(key: str, token: str, window_seconds: float, task: Any) -> dict[str, Any]:
    """The queue message body of a claimed task, in the wire order
    ``key``, ``claim``, ``windowSeconds``, ``task`` (the TypeScript shape)."""
    return {"key": key, "claim": token, "windowSeconds": wire_seconds(window_seconds), "task": task}


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
    validate_seconds(window_seconds, name="window_seconds")
    validate_task(task)
    if not callable(getattr(queue, "send", None)):
        raise TypeError(f"queue must have a send(body) method, got {type(queue).__name__}")
    alias = resolve_alias(using)
    connection = connections[alias]
    one_statement = _in_database_message(queue, alias, key, window_seconds, task)
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
                queue.send(envelope(key, token, window_seconds, task))
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
        queue.send(envelope(key, token, window_seconds, task))
    except Exception:
        try:
            release_task(key, token, using=alias)
        except Exception:
            logger.error(
                "task %s: send failed, then releasing its claim failed; key claimed for the window",
                key,
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
    PostgreSQL queue of ``alias`` or its ``send`` would raise: a bad option,
    or a body it rejects. The claim-then-send path then raises that error
    at the point it always does (after a claim, never for a held key)."""
    if not sends_in_database(queue, alias, "send"):
        return None
    if any(message.is_serious() for message in queue.check()):
        return None
    token = str(uuid.uuid4())
    try:
        body = queue.encode(envelope(key, token, window_seconds, task)).decode("utf-8")
    except (TypeError, ValueError):
        return None
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
