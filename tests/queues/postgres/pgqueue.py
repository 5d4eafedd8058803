"""Helpers of the PostgresQueue tests: queues on fresh names, their rows."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from django.db import connection

from astral_taskclaim.queues.postgres import PostgresQueue

# A TypeScript producer's JSON.stringify of an envelope: the bytes to keep.
TS_ENVELOPE = (
    '{"key":"room:café ☕","claim":"0C0FFEE0-AAAA-4BBB-8CCC-DDDDDDDDDDDD",'
    '"windowSeconds":300,"task":{"zeta":1,"alpha":[true,null]}}'
)


class MakeQueue(Protocol):
    def __call__(self, **options: Any) -> PostgresQueue: ...


@contextmanager
def queue_factory() -> Iterator[MakeQueue]:
    """Makes PostgresQueues on fresh queue names; deletes their rows at the end."""
    made: list[PostgresQueue] = []

    def make(**options: Any) -> PostgresQueue:
        options.setdefault("queue_name", f"test-{uuid.uuid4().hex}")
        queue = PostgresQueue("pg", options=options)
        made.append(queue)
        return queue

    try:
        yield make
    finally:
        for queue in made:
            queue.close()
        with connection.cursor() as cursor:
            cursor.execute(
                "DELETE FROM taskclaim.message WHERE queue = ANY(%s)",
                [[q.queue_name for q in made]],
            )


def rows(queue: PostgresQueue) -> list[dict[str, Any]]:
    """The queue's rows, with ``due_in`` (seconds until visible, DB clock)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT id, body, attempts, lease::text,
                      extract(epoch FROM visible_at - clock_timestamp())::float8 AS due_in
               FROM taskclaim.message WHERE queue = %s ORDER BY id""",
            [queue.queue_name],
        )
        names = [column.name for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def expire(queue: PostgresQueue) -> None:
    """Makes every message of ``queue`` due now, as if its lease or delay ran out."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE taskclaim.message SET visible_at = clock_timestamp() - interval '1 second' "
            "WHERE queue = %s",
            [queue.queue_name],
        )


# Planner settings that leave one plan: a nested loop rescanning its inner
# side for every outer row, without a Materialize node to replay it.
RESCANNING_PLANS = (
    "enable_hashagg",
    "enable_material",
    "enable_sort",
    "enable_hashjoin",
    "enable_mergejoin",
    "enable_seqscan",
)


@contextmanager
def rescanning_plans() -> Iterator[None]:
    """Makes this connection's planner rescan subqueries row by row: a
    statement whose LIMIT ... FOR UPDATE SKIP LOCKED part is not run once
    then locks (and writes) more rows than its limit."""
    with connection.cursor() as cursor:
        for name in RESCANNING_PLANS:
            cursor.execute(f"SET {name} = off")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            for name in RESCANNING_PLANS:
                cursor.execute(f"RESET {name}")


def bodies(queue: PostgresQueue) -> list[str]:
    """The queue's message bodies, oldest first."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT body FROM taskclaim.message WHERE queue = %s ORDER BY id", [queue.queue_name]
        )
        return [row[0] for row in cursor.fetchall()]
