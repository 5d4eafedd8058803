"""Row 3, bulk: ``claim_tasks`` (many keys, one call) against the floor of
one raw ``INSERT ... SELECT unnest(...)`` of the same keys, which claims
nothing conditionally; and ``enqueue_claimed_many`` (claims and their
messages on the PostgreSQL queue, one call) against its like-for-like floor:
one raw statement inserting the claims and the same message bodies.

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
ENQUEUE_FLOOR = "raw INSERT … SELECT unnest, claims and messages"

FLOOR_SQL = (
    "INSERT INTO taskclaim.claim (key, expires_at, token) "
    "SELECT k, CURRENT_TIMESTAMP + make_interval(secs => %s::float8), gen_random_uuid() "
    "FROM unnest(%s::text[]) AS k"
)
ENQUEUE_FLOOR_SQL = (
    "WITH sent AS (INSERT INTO taskclaim.message (queue, body) "
    "SELECT 'bench', b FROM unnest(%s::text[]) AS b) " + FLOOR_SQL
)


def run(ctx: Context, *, keys: int = 20_000, batch: int = BATCH) -> list[Row]:
    from django.db import connection

    from astral_taskclaim.claims.bulk import claim_tasks, enqueue_claimed_many
    from astral_taskclaim.queues import queues

    batch = max(1, min(batch, ctx.size(keys)))
    chunks = max(1, ctx.size(keys) // batch)
    queue = queues["bench"]
    variant_names = (CLAIMS, ENQUEUES, FLOOR, ENQUEUE_FLOOR)
    figures = {name: Figure("claims/s") for name in variant_names}
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

            def enqueue_floor(chunk: int) -> int:
                keys = names("g", chunk)
                bodies = [
                    f'{{"key":"{key}","claim":"00000000-0000-4000-8000-000000000000",'
                    f'"windowSeconds":300,"task":{{"n":{i}}}}}'
                    for i, key in enumerate(keys)
                ]
                statement = ENQUEUE_FLOOR_SQL
                return raw.execute(statement, (bodies, 300.0, keys), prepare=True).rowcount

            variants = {
                CLAIMS: claims,
                ENQUEUES: enqueues,
                FLOOR: floor,
                ENQUEUE_FLOOR: enqueue_floor,
            }
            for name, value in alternating_rates(variants, chunks=chunks, run=index).items():
                figures[name].add(value)
            raw.execute("DELETE FROM taskclaim.claim WHERE key LIKE 'bulk:%'")
            raw.execute("DELETE FROM taskclaim.message WHERE queue = 'bench'")
    connection.close()
    rows = []
    for number, name, floor_name in (("3.1", CLAIMS, FLOOR), ("3.2", ENQUEUES, ENQUEUE_FLOOR)):
        ours = figures[name].median
        ratio = ours / figures[floor_name].median
        rows.append(
            Row(
                number,
                f"bulk: {name}",
                f"{ours:,.0f}/s, {ratio:.2f}x floor",
                f"≥ {MIN_RATE:,}/s, ≥ {MIN_RATIO:.2f}x",
                ours >= MIN_RATE and ratio >= MIN_RATIO,
                {name: figures[name], floor_name: figures[floor_name]},
                value=ratio,
                details={"batch": batch, "batches_per_run": chunks},
            )
        )
    return rows
