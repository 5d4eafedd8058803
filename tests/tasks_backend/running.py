"""Helpers of the Django Tasks backend tests: run the ``default`` queue in
this thread, make its waiting messages due, and read its rows."""

from __future__ import annotations

import json
from typing import Any

from django.db import connection

from astral_taskclaim.consumer.summary import WorkerStats
from astral_taskclaim.worker.loop import Worker


def drain(*, batch_size: int = 10, max_messages: int | None = None) -> WorkerStats:
    """Runs the ``default`` queue's due messages in this thread, as
    ``consume_claimed default --burst`` would. ``max_messages=1`` stops after
    one delivery, so a retry that comes due meanwhile waits for the next."""
    worker = Worker("default", batch_size=batch_size, wait=0, burst=True, max_messages=max_messages)
    return worker.run()


def make_due() -> None:
    """Retries and deferred runs become due now (instead of waiting)."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE taskclaim.message SET visible_at = statement_timestamp()")


def message_rows() -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT body, priority, visible_at, last_error, attempts "
            "FROM taskclaim.message WHERE queue = 'default' ORDER BY id"
        )
        return [(json.loads(body), *rest) for body, *rest in cursor.fetchall()]


def claims() -> list[tuple[str, str]]:
    """Every claim's key and token, by key."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, token::text FROM taskclaim.claim ORDER BY key")
        return cursor.fetchall()
