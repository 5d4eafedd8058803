"""Row 6, growth and cleanup.

6.1: the latency of ``claim_task`` (fresh keys, spread over the whole key
range so they land all over the primary-key index) with 1,000 claim rows
and with 10,000,000. The table is filled by one ``INSERT ... SELECT
generate_series`` and analysed; the two sizes run one after the other (a
fill takes minutes), each size's runs back to back. Target: ≤ 1.2x.

6.2: ``manage.py taskclaim_delete_expired`` over 1,000,000 expired claims
while 2 threads claim keys, half of them among the expired rows being
deleted. Target: no claim takes over 50 ms.
"""

from __future__ import annotations

import random
import threading
import time

from .common import Context, Figure, percentile
from .report import Row

RATIO = 1.2
MAX_WAIT_MS = 50.0

FILL = (
    "INSERT INTO taskclaim.claim (key, expires_at, token) "
    "SELECT %s || lpad(i::text, 9, '0'), CURRENT_TIMESTAMP + make_interval(secs => %s), "
    "gen_random_uuid() FROM generate_series(1, %s) AS i"
)


def _fill(ctx: Context, rows: int, *, prefix: str, seconds: float) -> None:
    with ctx.connect() as raw:
        raw.execute("TRUNCATE taskclaim.claim")
        # Keys in index order: the fill appends to the B-tree instead of
        # splitting pages all over it, minutes faster at 10,000,000.
        raw.execute(FILL, (prefix, seconds, rows))
        raw.execute("VACUUM ANALYZE taskclaim.claim")
        raw.execute("CHECKPOINT")


def _latencies(n: int, rng: random.Random, prefix: str, span: int) -> list[float]:
    from astral_taskclaim import claim_task

    out = []
    for _ in range(n):
        # Between two filled keys: "g:000123456" < "g:000123456-x…" < "g:000123457".
        key = f"{prefix}{rng.randrange(span):09d}-{rng.getrandbits(48):012x}"
        start = time.perf_counter()
        claim_task(key, window_seconds=300)
        out.append((time.perf_counter() - start) * 1000)
    return out


def run(
    ctx: Context,
    *,
    small: int = 1000,
    big: int = 10_000_000,
    claims: int = 1000,
    expired: int = 1_000_000,
) -> list[Row]:
    from django.db import connection

    sizes = (ctx.size(small, minimum=10), ctx.size(big, minimum=100))
    n = ctx.size(claims, minimum=20)
    figures = {f"{size:,} rows": Figure("ms per claim (median)") for size in sizes}
    for size in sizes:
        _fill(ctx, size, prefix="g:", seconds=3600)
        rng = random.Random(ctx.seed)
        _latencies(20, rng, "g:", size)  # warm
        for _ in range(ctx.runs):
            figures[f"{size:,} rows"].add(percentile(_latencies(n, rng, "g:", size), 0.5))
    ratio = figures[f"{sizes[1]:,} rows"].median / figures[f"{sizes[0]:,} rows"].median
    rows = [
        Row(
            "6.1",
            f"claim latency at {sizes[1]:,} vs {sizes[0]:,} rows",
            f"{ratio:.2f}x ({figures[f'{sizes[1]:,} rows'].median:.2f} ms)",
            f"≤ {RATIO}x",
            ratio <= RATIO,
            figures,
            value=ratio,
            details={"claims_per_run": n},
        )
    ]
    rows.append(_cleanup_row(ctx, ctx.size(expired, minimum=100)))
    with ctx.connect() as raw:
        raw.execute("TRUNCATE taskclaim.claim")
    connection.close()
    return rows


def _cleanup_row(ctx: Context, expired: int) -> Row:
    from django.core.management import call_command
    from django.db import connection

    _fill(ctx, expired, prefix="x:", seconds=-3600)
    waits: list[float] = []
    done = threading.Event()
    deleted: list[float] = []

    def claimer(seed: int) -> None:
        from astral_taskclaim import claim_task

        rng = random.Random(seed)
        try:
            while not done.is_set():
                if rng.random() < 0.5:
                    key = f"x:{rng.randrange(1, expired + 1):09d}"  # an expired row
                else:
                    key = f"y:{rng.getrandbits(64):016x}"
                start = time.perf_counter()
                claim_task(key, window_seconds=300)
                waits.append((time.perf_counter() - start) * 1000)
        finally:
            connection.close()

    def cleaner() -> None:
        start = time.perf_counter()
        try:
            call_command("taskclaim_delete_expired", verbosity=0)
        finally:
            deleted.append(time.perf_counter() - start)
            connection.close()
            done.set()

    threads = [threading.Thread(target=claimer, args=(ctx.seed + i,)) for i in range(2)]
    threads.append(threading.Thread(target=cleaner))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    worst = max(waits) if waits else float("nan")
    figure = Figure("ms per claim")
    figure.samples = [percentile(waits, 0.5), percentile(waits, 0.99), worst]
    return Row(
        "6.2",
        f"claims while deleting {expired:,} expired",
        f"max {worst:.1f} ms, p99 {percentile(waits, 0.99):.1f} ms ({len(waits):,} claims)",
        f"no claim > {MAX_WAIT_MS:g} ms",
        worst <= MAX_WAIT_MS,
        {"claim_task during delete (p50 / p99 / max)": figure},
        value=worst,
        details={"claims": len(waits), "delete_seconds": deleted[0] if deleted else None},
    )
