"""Async claims and claimed enqueueing, for ASGI views and other coroutines.

:func:`aclaim_task`, :func:`ahold_task`, :func:`arelease_task` and
:func:`aenqueue_claimed` take the arguments of their sync namesakes, check
them the same way (the same ``TypeError``/``ValueError``/
``ImproperlyConfigured``, raised before anything is written) and run the
same SQL files. Their statements run natively on the event loop, on
connections of their own (:mod:`~astral_taskclaim.db.aio_pool`), so many
requests claim at once: no ``SynchronousOnlyOperation``, and no thread that
every request has to queue for.

Transactions: these functions never join one. Each call commits on its
own, as the sync functions do outside ``transaction.atomic()``. A Django
transaction belongs to a connection these functions do not use (and async
code cannot open one without ``DJANGO_ALLOW_ASYNC_UNSAFE``): where the
current context's connection to the claims database is inside
``atomic()``, they raise ``TransactionManagementError`` rather than commit
behind it. Code that needs the claim and message to commit with its own
writes calls the sync :func:`~astral_taskclaim.claims.claim.enqueue_claimed`
inside ``atomic()``, from ``sync_to_async`` in async code. Driving the async
functions with ``async_to_sync`` from inside a sync ``atomic()`` block is
not detectable and commits independently of that block: don't.

Sends follow the sync call's rules (:func:`~astral_taskclaim.claims.writing.plan`):
a queue whose messages live in the claims database (the PostgreSQL queue, a
remote queue with an outbox) writes claim and message in one statement.
Any other queue's ``send`` is blocking code (an HTTP request, a boto3 call, a write through
Django's connection); it runs in the event loop's thread pool
(``sync_to_async(thread_sensitive=False)``), so sends run side by side and
the queue's ``send`` must be thread-safe (the stock ones are); a queue
with a coroutine ``asend(body)`` of its own (the Tasks backend's sender,
which records its result row on the loop) is awaited instead. The claim is
written first and released if the send fails, as in the sync call; a
caller cancelled in between (a client that went away) does not stop the
send, so the key is never left claimed with nothing queued.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import uuid
from typing import Any

from asgiref.sync import sync_to_async

from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.claims.writing import (
    Sender,
    async_write_alias,
    claim_params,
    hold_params,
    log_claim_left,
    plan,
    release_params,
)
from astral_taskclaim.core.envelope import PLACEHOLDER_TOKEN, encode_json, message_body
from astral_taskclaim.core.tracing import traced_send
from astral_taskclaim.core.validation import (
    TrailingOption,
    validate_key,
    validate_trailing,
    validate_window,
)
from astral_taskclaim.db.aio_pool import aclose_pools, run

__all__ = [
    "aclaim_task",
    "aclose_connections",
    "aenqueue_claimed",
    "ahold_task",
    "arelease_task",
]

logger = logging.getLogger(__name__)


async def aclaim_task(key: str, *, window_seconds: float, using: str | None = None) -> str | None:
    """Async :func:`~astral_taskclaim.claims.claim.claim_task`: a fresh token, or
    ``None`` while an unexpired claim holds ``key``."""
    params = claim_params(key, window_seconds)
    alias = async_write_alias(using, "aclaim_task")
    rows = await run(alias, "taskclaim/claim.sql", params)
    token: str | None = rows[0][0] if rows else None
    return token


async def ahold_task(
    key: str, token: str, *, delay_seconds: float, window_seconds: float, using: str | None = None
) -> None:
    """Async :func:`~astral_taskclaim.claims.claim.hold_task`: keeps ``key``
    claimed by ``token`` for ``delay_seconds`` plus ``window_seconds``."""
    params = hold_params(key, token, delay_seconds, window_seconds)
    alias = async_write_alias(using, "ahold_task")
    await run(alias, "taskclaim/hold.sql", params)


async def arelease_task(key: str, token: str, *, using: str | None = None) -> None:
    """Async :func:`~astral_taskclaim.claims.claim.release_task`: frees ``key`` if
    ``token`` still holds it."""
    params = release_params(key, token)
    alias = async_write_alias(using, "arelease_task")
    await run(alias, "taskclaim/release.sql", params)


@traced_send
async def aenqueue_claimed(
    queue: Sender,
    key: str,
    task: Any,
    *,
    window_seconds: float,
    trailing: TrailingOption = None,
    using: str | None = None,
) -> str | None:
    """Async :func:`~astral_taskclaim.claims.claim.enqueue_claimed`: sends
    ``task`` to ``queue`` under a fresh claim of ``key``; the claim token,
    or ``None`` (nothing sent) while a claim holds ``key``.

    Always outside any transaction (see the module docstring). On a queue
    whose messages live in the claims database (the PostgreSQL queue, a
    remote queue with an outbox), claim and message commit in one
    statement; otherwise the claim commits, then ``queue.send`` runs in
    a worker thread, and a failed send releases the claim and re-raises.
    ``trailing`` as for the sync function, which then runs in a thread.
    """
    validate_key(key)
    validate_window(window_seconds)
    if validate_trailing(trailing) is not None:
        alias = async_write_alias(using, "aenqueue_claimed")
        enqueue = sync_to_async(
            functools.partial(
                enqueue_claimed, window_seconds=window_seconds, trailing=trailing, using=alias
            )
        )
        return await asyncio.shield(enqueue(queue, key, task))
    task_json = encode_json(task, name="task")
    if not callable(getattr(queue, "send", None)):
        raise TypeError(f"queue must have a send(body) method, got {type(queue).__name__}")
    alias = async_write_alias(using, "aenqueue_claimed")
    placeholder = message_body(key, PLACEHOLDER_TOKEN, window_seconds, task)
    how = plan(
        queue,
        alias,
        function="aenqueue_claimed",
        placeholders=[placeholder],
        outside_transaction=True,  # checked by async_write_alias
    )
    if how.insert is not None:
        token = str(uuid.uuid4())
        body = how.insert.writer(window_seconds)(key, token, task, task_json)
        params = how.insert.one_params(key, token, body, window_seconds)
        return token if await run(alias, how.insert.one, params) else None
    # Shielded: a caller cancelled between the claim and the send (a client
    # that went away) must not leave the key claimed with nothing queued.
    return await asyncio.shield(_claim_then_send(queue, alias, key, task, window_seconds))


async def _claim_then_send(
    queue: Sender, alias: str, key: str, task: Any, window_seconds: float
) -> str | None:
    claimed = await aclaim_task(key, window_seconds=window_seconds, using=alias)
    if claimed is None:
        return None
    body = message_body(key, claimed, window_seconds, task)
    # A sender with a coroutine asend of its own (the Tasks backend's, which
    # writes its result row on this loop) is awaited, not run in a thread.
    asend = getattr(queue, "asend", None)
    try:
        if asend is not None and inspect.iscoroutinefunction(asend):
            await asend(body)
        else:
            await sync_to_async(queue.send, thread_sensitive=False)(body)
    except Exception:
        try:
            await arelease_task(key, claimed, using=alias)
        except Exception:
            log_claim_left(logger, queue, key)
        raise
    return claimed


async def aclose_connections() -> None:
    """Closes the connections the async functions opened on the running
    event loop (those in use as soon as their statement ends), as the
    loop's shutdown does. Call it when the loop's work is done, e.g. at ASGI
    lifespan shutdown; a later call opens new ones."""
    await aclose_pools()
