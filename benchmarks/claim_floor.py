"""Row 1, the claim floor: ``claim_task`` against the very statement it
sends, sent by raw psycopg 3 as a prepared statement on an autocommit
connection (what Django opens too). Every claim is of a fresh key, so each
one inserts and commits: the common first trigger of a key.

Row 1.2 does the same on keys already claimed (a read: nothing to flush)
and row 1.3 on fresh keys with ``synchronous_commit=off``, so Django's
share shows rather than hiding behind the WAL flush.

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


#: (row, title, keys already held, synchronous_commit off)
VARIANTS = (
    ("1.1", "claim floor, fresh keys", False, False),
    ("1.2", "claim floor, hot keys (no write)", True, False),
    ("1.3", "claim floor, fresh keys, synchronous_commit=off", False, True),
)
HOT = 16


def run(ctx: Context, *, claims: int = 5000) -> list[Row]:
    """Row 1.1 as described above; 1.2 claims keys an unexpired claim holds
    (a read, nothing to flush), 1.3 fresh keys with ``synchronous_commit``
    off on both connections: with no WAL flush to wait for, the client
    side's share, Django's included, is no longer hidden behind the disk."""
    return [_run_variant(ctx, *variant, claims=claims) for variant in VARIANTS]


def _run_variant(
    ctx: Context, number: str, title: str, hot: bool, async_commit: bool, *, claims: int
) -> Row:
    from django.db import connection

    from astral_taskclaim import claim_task

    n = ctx.size(claims, minimum=10)
    per_chunk = min(CHUNK, n)
    chunks = max(1, n // per_chunk)
    statement = sqlfiles.read("taskclaim/claim.sql")
    figures = {OURS: Figure("claims/s"), FLOOR: Figure("claims/s")}
    held = [f"floor:{number}:held:{i}" for i in range(HOT)]

    def key(side: str, index: int, chunk: int, i: int) -> str:
        return held[i % HOT] if hot else f"floor:{number}:{index}:{chunk}:{side}:{i}"

    setting = "SET synchronous_commit = " + ("off" if async_commit else "on")
    with ctx.connect() as raw:
        raw.execute(setting)
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute(setting)
        # Both sides warm: the first calls plan the statement and, for
        # psycopg, prepare it; Django opens its connection.
        for i in range(20):
            claim_task(f"floor:{number}:warm:ours:{i}", window_seconds=300)
            raw.execute(
                statement, {"key": f"floor:{number}:warm:raw:{i}", "seconds": 300.0}, prepare=True
            ).fetchall()
        for k in held:
            claim_task(k, window_seconds=3600)
        for index in range(ctx.runs):

            def ours(chunk: int, index: int = index) -> int:
                for i in range(per_chunk):
                    claim_task(key("ours", index, chunk, i), window_seconds=300)
                return per_chunk

            def floor(chunk: int, index: int = index) -> int:
                for i in range(per_chunk):
                    params = {"key": key("raw", index, chunk, i), "seconds": 300.0}
                    raw.execute(statement, params, prepare=True).fetchall()
                return per_chunk

            rates = alternating_rates({OURS: ours, FLOOR: floor}, chunks=chunks, run=index)
            for name, value in rates.items():
                figures[name].add(value)
        raw.execute("DELETE FROM taskclaim.claim WHERE key LIKE 'floor:%'")
    connection.close()  # synchronous_commit back to the server's default
    ratio = figures[OURS].median / figures[FLOOR].median
    return Row(
        number,
        title,
        f"{ratio:.2f}x raw ({figures[OURS].median:,.0f} vs {figures[FLOOR].median:,.0f}/s)",
        f"≥ {TARGET:.2f}x raw",
        ratio >= TARGET,
        figures,
        value=ratio,
        details=workload(per_chunk * chunks, per_chunk, hot, async_commit),
    )


def workload(claims: int, chunk: int, hot: bool, async_commit: bool) -> dict[str, object]:
    """The ``details`` of a row run on one of :data:`VARIANTS`' workloads."""
    return {
        "claims_per_run": claims,
        "chunk": chunk,
        "keys_held": hot,
        "synchronous_commit": "off" if async_commit else "on",
    }
