"""Row 3, bulk: ``claim_tasks`` (many keys, one call) and
``enqueue_claimed_many`` (claims and their messages on the PostgreSQL
queue, one call) against the floor: one raw ``INSERT ... SELECT unnest(...)``
of the same keys, which claims nothing conditionally and sends nothing.

Targets: at least 50,000 claims/s, and at least 0.70 of the floor's rate.
"""

from __future__ import annotations

from .common import Context, Figure, alternating_rates
from .report import Row

MIN_RATE = 50_000
MIN_RATIO = 0.70
BATCH = 1000
CLAIMS = "claim_tasks"
ENQUEUES = "enqueue_claimed_many"
FLOOR = "raw INSERT … SELECT unnest"

FLOOR_SQL = (
    "INSERT INTO taskclaim.claim (key, expires_at, token) "
    "SELECT k, CURRENT_TIMESTAMP + make_interval(secs => %s::float8), gen_random_uuid() "
    "FROM unnest(%s::text[]) AS k"
)


def run(ctx: Context, *, keys: int = 20_000, batch: int = BATCH) -> list[Row]:
    from django.db import connection

    from astral_taskclaim.bulk import claim_tasks, enqueue_claimed_many
    from astral_taskclaim.queues import queues

    batch = max(1, min(batch, ctx.size(keys)))
    chunks = max(1, ctx.size(keys) // batch)
    queue = queues["bench"]
    figures = {name: Figure("claims/s") for name in (CLAIMS, ENQUEUES, FLOOR)}
    with ctx.connect() as raw:
        for index in range(ctx.runs):

            def names(kind: str, chunk: int, index: int = index) -> list[str]:
                return [f"bulk:{index}:{chunk}:{kind}:{i}" for i in range(batch)]

            def claims(chunk: int) -> int:
                return sum(
                    t is not None for t in claim_tasks(names("c", chunk), window_seconds=300)
                )

            def enqueues(chunk: int) -> int:
                items = [(key, {"n": i}) for i, key in enumerate(names("e", chunk))]
                tokens = enqueue_claimed_many(queue, items, window_seconds=300)
                return sum(t is not None for t in tokens)

            def floor(chunk: int) -> int:
                return raw.execute(FLOOR_SQL, (300.0, names("f", chunk)), prepare=True).rowcount

            variants = {CLAIMS: claims, ENQUEUES: enqueues, FLOOR: floor}
            for name, value in alternating_rates(variants, chunks=chunks, run=index).items():
                figures[name].add(value)
            raw.execute("DELETE FROM taskclaim.claim WHERE key LIKE 'bulk:%'")
            raw.execute("DELETE FROM taskclaim.message WHERE queue = 'bench'")
    connection.close()
    floor_rate = figures[FLOOR].median
    rows = []
    for number, name in (("3.1", CLAIMS), ("3.2", ENQUEUES)):
        ours = figures[name].median
        ratio = ours / floor_rate
        rows.append(
            Row(
                number,
                f"bulk: {name}",
                f"{ours:,.0f}/s, {ratio:.2f}x floor",
                f"≥ {MIN_RATE:,}/s, ≥ {MIN_RATIO:.2f}x",
                ours >= MIN_RATE and ratio >= MIN_RATIO,
                {name: figures[name], FLOOR: figures[FLOOR]},
                value=ratio,
                details={"batch": batch, "batches_per_run": chunks},
            )
        )
    return rows
