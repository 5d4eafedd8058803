"""The backend's async enqueue, run natively on the event loop.

Statements go through :mod:`~astral_taskclaim.db.aio_pool`'s connections (in
autocommit), as :mod:`~astral_taskclaim.claims.async_api`'s functions do, so many
requests enqueue at once without a thread each. Each function mirrors its
sync twin in :mod:`.backend` and returns ``(enqueued_at, holder)``: the new
run's enqueue time, or the token of the run holding the key.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async

from astral_taskclaim.claims.async_api import aenqueue_claimed
from astral_taskclaim.core.tracing import sending
from astral_taskclaim.db.aio_pool import run
from astral_taskclaim.queues import BaseQueue
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks_backend.sending import ENQUEUE_TRIES, RecordingSender, RunRequest


class _LoopRecordingSender(RecordingSender):
    """A :class:`~.sending.RecordingSender` for ``aenqueue_claimed``, which
    awaits its :meth:`asend`: the result row's statements run on the event
    loop's own connections, and only the queue's blocking ``send`` goes to
    a worker thread (a Django connection opened there would never be
    closed, and a thread handing statements back to the loop costs one
    thread per enqueue)."""

    async def asend(self, body: dict[str, Any]) -> None:
        """:meth:`~.sending.RecordingSender.send` on the event loop."""
        delay = self.recorded(body, await run(self.database, *self.record_statement(body)))
        try:
            await sync_to_async(self.queue.send, thread_sensitive=False)(body, delay_seconds=delay)
        except Exception:
            try:
                await run(self.database, *self.forget_statement(body))
            except Exception:
                self.log_forget_failure(body)
            raise


async def aenqueue_in_database(
    queue: PostgresQueue, database: str, request: RunRequest
) -> tuple[datetime | None, str | None]:
    """Claim, message and result row in one statement (``tasks/enqueue.sql``,
    as the sync path runs it), committed at once."""
    with sending(queue, request.envelope_key, request.task.module_path):
        for _ in range(ENQUEUE_TRIES):
            params = request.in_database_params(queue)
            [(enqueued_at, holder)] = await run(database, "tasks/enqueue.sql", params)
            if enqueued_at is not None or holder is not None:
                return enqueued_at, holder
    raise request.changing_hands(request.envelope_key)


async def aenqueue_elsewhere(
    queue: BaseQueue, database: str, request: RunRequest
) -> tuple[datetime | None, str | None]:
    """Through :func:`~astral_taskclaim.claims.async_api.aenqueue_claimed`: the claim
    natively, then the result row and the message from the queue's send
    (blocking code, in a worker thread); a failed send deletes the row and
    releases the claim."""
    sender = _LoopRecordingSender(queue, database, request)
    key = request.envelope_key
    token = await aenqueue_claimed(
        sender, key, request.payload, window_seconds=request.claim_window(), using=database
    )
    if token is not None:
        request.token = token
        return sender.enqueued_at, None
    holder = await run(database, "tasks/holder.sql", {"key": key})
    if holder:
        return None, holder[0][0]
    raise request.changing_hands(key)
