"""Row 8, cost per message, read from ``pg_stat_statements``: statements
(each one a round trip) per ``enqueue_claimed``, per received batch and per
settled batch on the PostgreSQL queue, and the same for the bulk
``enqueue_claimed_many``. Transaction control (``BEGIN``, ``COMMIT``,
savepoints) counts: it is a round trip too.

Recorded, not judged: the figures show where the time of rows 1-5 goes.
Needs ``pg_stat_statements`` in ``shared_preload_libraries`` (the embedded
server gets it; with ``DATABASE_URL`` the row is skipped without it).
"""

from __future__ import annotations

from typing import Any

from .common import Context, Figure
from .report import Row, skipped

BATCH = 100


def _count(raw: Any) -> dict[str, int]:
    """Calls per statement text in our database, ours only."""
    rows = raw.execute(
        "SELECT query, calls FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
        "WHERE d.datname = current_database() AND query NOT ILIKE %s",
        ("%pg_stat_statements%",),
    ).fetchall()
    return {query: int(calls) for query, calls in rows}


def _measure(raw: Any, action: Any) -> tuple[int, dict[str, int]]:
    raw.execute("SELECT pg_stat_statements_reset()")
    action()
    counts = _count(raw)
    return sum(counts.values()), counts


def run(ctx: Context, *, messages: int = 500) -> list[Row]:
    from django.db import connection

    from astral_taskclaim.claims.bulk import enqueue_claimed_many
    from astral_taskclaim.claims.claim import enqueue_claimed
    from astral_taskclaim.queues import queues

    with ctx.connect() as raw:
        loaded = raw.execute("SHOW shared_preload_libraries").fetchone()
        if not loaded or "pg_stat_statements" not in str(loaded[0]):
            return [
                skipped(
                    "8",
                    "round trips per message",
                    "recorded",
                    "pg_stat_statements is not in shared_preload_libraries",
                )
            ]
        raw.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        raw.execute("DELETE FROM taskclaim.message WHERE queue = 'bench'")
        queue = queues["bench"]
        n = ctx.size(messages, minimum=BATCH)
        batches = n // BATCH
        connection.ensure_connection()

        def enqueue() -> None:
            for i in range(n):
                enqueue_claimed(queue, f"rt:{i}", {"i": i}, window_seconds=300)

        received: list[Any] = []

        def receive() -> None:
            for _ in range(batches):
                batch = queue.receive(max_messages=BATCH)
                for message in batch.messages:
                    message.ack()
                received.append(batch)

        def settle() -> None:
            for batch in received:
                queue.settle(batch.messages)

        def enqueue_many() -> None:
            items = [(f"rtm:{i}", {"i": i}) for i in range(n)]
            enqueue_claimed_many(queue, items, window_seconds=300)

        costs: dict[str, tuple[float, dict[str, int]]] = {}
        for name, action, per in (
            ("per enqueue_claimed", enqueue, n),
            ("per received batch of 100", receive, batches),
            ("per settled batch of 100", settle, batches),
            (f"per enqueue_claimed_many of {n}", enqueue_many, 1),
        ):
            total, counts = _measure(raw, action)
            costs[name] = (total / per, counts)
        raw.execute("DELETE FROM taskclaim.message WHERE queue = 'bench'")
        raw.execute("DELETE FROM taskclaim.claim WHERE key LIKE 'rt%'")
    figures = {}
    for name, (value, _) in costs.items():
        figure = Figure("statements")
        figure.add(value)
        figures[name] = figure
    summary = ", ".join(f"{value:.1f} {name}" for name, (value, _) in costs.items())
    return [
        Row(
            "8",
            "round trips per message (pg_stat_statements)",
            summary,
            "recorded",
            None,
            figures,
            details={
                name: {"statements": value, "by_query": _short(counts)}
                for name, (value, counts) in costs.items()
            },
        )
    ]


def _short(counts: dict[str, int]) -> dict[str, int]:
    return {" ".join(query.split())[:120]: calls for query, calls in counts.items()}
