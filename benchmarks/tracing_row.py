"""Row 14, the cost of OpenTelemetry tracing: row 4.7's end to end (4
producers enqueueing no-op claimed tasks one per call, 2 ``consume_claimed``
workers running them at once) with tracing on (the SDK's tracer provider,
no exporter: every enqueue and run makes its span, and each body carries
its trace context) against off (no provider: the bodies and the path of
today), the two interleaved.

Recorded: on as a ratio of off. Off is the code path of every project that
sets up no tracer provider, so row 4.7 itself says that off costs nothing.
"""

from __future__ import annotations

import os

from . import end_to_end
from .common import Context, Figure
from .report import Row

#: The environment variable the benchmark settings read (producers and
#: workers inherit it).
TRACING_VARIABLE = "TASKCLAIM_BENCH_TRACING"
MODES = {"on": "tracing on", "off": "tracing off"}


def run(ctx: Context, *, tasks: int = 10_000) -> list[Row]:
    from django.db import connections

    connections.close_all()  # the driver's workers share our database
    n = ctx.size(tasks, minimum=20)
    figures = {label: Figure("tasks/s") for label in MODES.values()}
    try:
        for index in range(ctx.runs):
            order = list(MODES) if index % 2 == 0 else list(MODES)[::-1]
            for mode in order:
                os.environ[TRACING_VARIABLE] = mode
                result = end_to_end.drive(
                    ctx.database_url, end_to_end.OURS, tasks=n, dedup=True, tag=f"t{index}{mode}"
                )
                done = float(result.get("done", n))  # type: ignore[arg-type]
                figures[MODES[mode]].add(done / float(result["seconds"]))  # type: ignore[arg-type]
    finally:
        os.environ.pop(TRACING_VARIABLE, None)
    on, off = figures[MODES["on"]], figures[MODES["off"]]
    ratio = on.median / off.median
    return [
        Row(
            "14",
            "end to end with OpenTelemetry tracing on",
            f"{ratio:.2f}x tracing off ({on.median:,.0f} vs {off.median:,.0f}/s)",
            "recorded",
            True,
            figures,
            value=ratio,
            details={"tasks": n, "workers": end_to_end.WORKERS, "mode": "e2e"},
        )
    ]
