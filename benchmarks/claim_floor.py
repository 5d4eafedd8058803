"""Row 1, the claim floor: ``claim_task`` against the very statement it
sends, sent by raw psycopg 3 as a prepared statement on an autocommit
connection (what Django opens too). Every claim is of a fresh key, so each
one inserts and commits: the common first trigger of a key.

Target: ``claim_task`` reaches at least 0.90 of the raw rate.
"""

from __future__ import annotations

from astral_taskclaim.db import sqlfiles

from .common import Context, Figure, alternating_rates
from .report import Row

TARGET = 0.90
OURS = "claim_task"
FLOOR = "raw psycopg, prepared"
#: Claims per alternating chunk.
CHUNK = 50


def run(ctx: Context, *, claims: int = 5000) -> list[Row]:
    from django.db import connection

    from astral_taskclaim import claim_task

    n = ctx.size(claims, minimum=10)
    per_chunk = min(CHUNK, n)
    chunks = max(1, n // per_chunk)
    statement = sqlfiles.read("taskclaim/claim.sql")
    figures = {OURS: Figure("claims/s"), FLOOR: Figure("claims/s")}
    with ctx.connect() as raw:
        # Both sides warm: the first calls plan the statement and, for
        # psycopg, prepare it; Django opens its connection.
        for i in range(20):
            claim_task(f"floor:warm:ours:{i}", window_seconds=300)
            raw.execute(
                statement, {"key": f"floor:warm:raw:{i}", "seconds": 300.0}, prepare=True
            ).fetchall()
        for index in range(ctx.runs):

            def ours(chunk: int, index: int = index) -> int:
                keys = [f"floor:{index}:{chunk}:ours:{i}" for i in range(per_chunk)]
                return sum(claim_task(key, window_seconds=300) is not None for key in keys)

            def floor(chunk: int, index: int = index) -> int:
                claimed = 0
                for i in range(per_chunk):
                    params = {"key": f"floor:{index}:{chunk}:raw:{i}", "seconds": 300.0}
                    claimed += bool(raw.execute(statement, params, prepare=True).fetchall())
                return claimed

            rates = alternating_rates({OURS: ours, FLOOR: floor}, chunks=chunks, run=index)
            for name, value in rates.items():
                figures[name].add(value)
        raw.execute("DELETE FROM taskclaim.claim WHERE key LIKE 'floor:%'")
    connection.close()
    ratio = figures[OURS].median / figures[FLOOR].median
    return [
        Row(
            "1",
            "claim floor: claim_task vs raw prepared",
            f"{ratio:.2f}x raw ({figures[OURS].median:,.0f}/s)",
            f"≥ {TARGET:.2f}x raw",
            ratio >= TARGET,
            figures,
            value=ratio,
            details={"claims_per_run": per_chunk * chunks, "chunk": per_chunk},
        )
    ]
