"""Row 5, latency: from an enqueue's commit to its task's start, with the
producers paced at half the maximum rate row 4 measured, 2 worker
processes waiting on LISTEN/NOTIFY (their polling fallback is 2 s, so a
missed wake-up would show at once in the p99).

The task writes its start time (wall clock, shared by the processes); the
producer notes when each ``enqueue_claimed`` returned, which is after its
commit. Targets: p50 ≤ 5 ms, p99 ≤ 50 ms.
"""

from __future__ import annotations

from . import end_to_end
from .common import Context, Figure, percentile
from .report import Row

P50_MS = 5.0
P99_MS = 50.0
SECONDS = 8.0


def run(ctx: Context, *, tasks: int = 2000) -> list[Row]:
    from django.db import connections

    connections.close_all()
    url = ctx.database_url
    max_rate = ctx.shared.get("max_rate")
    if not max_rate:
        probe = end_to_end.drive(
            url, end_to_end.OURS, tasks=ctx.size(1000, minimum=20), dedup=True, tag="probe"
        )
        max_rate = ctx.size(1000, minimum=20) / float(probe["seconds"])  # type: ignore[arg-type]
    rate = max_rate / 2
    n = max(20, min(ctx.size(tasks, minimum=20), int(rate * SECONDS)))
    p50, p99 = Figure("ms"), Figure("ms")
    unmatched = 0
    for index in range(ctx.runs):
        result = end_to_end.drive(
            url, end_to_end.OURS, tasks=n, dedup=True, tag=f"lat{index}", rate=rate
        )
        latencies = [float(x) for x in result["latencies_ms"]]  # type: ignore[attr-defined]
        unmatched += int(result["unmatched"])  # type: ignore[call-overload]
        p50.add(percentile(latencies, 0.50))
        p99.add(percentile(latencies, 0.99))
    holds = p50.median <= P50_MS and p99.median <= P99_MS and unmatched == 0
    return [
        Row(
            "5",
            "latency, enqueue commit to run start",
            f"p50 {p50.median:.1f} ms, p99 {p99.median:.1f} ms at {rate:,.0f}/s",
            f"p50 ≤ {P50_MS:g} ms, p99 ≤ {P99_MS:g} ms",
            holds,
            {"astral-taskclaim p50": p50, "astral-taskclaim p99": p99},
            value=p99.median,
            note=f"{unmatched} tasks never started" if unmatched else "",
            details={"rate_per_s": rate, "max_rate_per_s": max_rate, "tasks_per_run": n},
        )
    ]
