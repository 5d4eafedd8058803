"""Row 11, the run history's cost: row 4.5's drain (a queue of 100,000
no-op claimed tasks filled beforehand, 2 ``consume_claimed`` worker
processes started at once, for 20 s at most) with the history on (the
default, ``HISTORY: "all"``: a ``taskclaim.run`` row per message, written
in the settle statement) against the same drain with ``HISTORY: "none"``,
the two interleaved.

Target: history on loses at most 15%, so at least 0.85x of history off.
"""

from __future__ import annotations

import os

from . import end_to_end
from .common import Context, Figure
from .report import Row

TARGET = 0.85
#: The environment variable the benchmark settings read for the bench
#: queue's ``HISTORY`` (worker processes inherit it).
HISTORY_VARIABLE = "TASKCLAIM_BENCH_HISTORY"
MODES = {"all": "history on", "none": "history off"}


def run(ctx: Context, *, tasks: int = 100_000) -> list[Row]:
    from django.db import connections

    connections.close_all()  # the driver's workers share our database
    n = ctx.size(tasks, minimum=20)
    figures = {label: Figure("tasks/s") for label in MODES.values()}
    try:
        for index in range(ctx.runs):
            order = list(MODES) if index % 2 == 0 else list(MODES)[::-1]
            for mode in order:
                os.environ[HISTORY_VARIABLE] = mode
                result = end_to_end.drive(
                    ctx.database_url,
                    end_to_end.OURS,
                    tasks=n,
                    dedup=True,
                    tag=f"h{index}{mode}",
                    mode="drain",
                    drain_limit=end_to_end.DRAIN_LIMIT,
                )
                done = float(result.get("done", n))  # type: ignore[arg-type]
                figures[MODES[mode]].add(done / float(result["seconds"]))  # type: ignore[arg-type]
    finally:
        os.environ.pop(HISTORY_VARIABLE, None)
    on, off = figures[MODES["all"]], figures[MODES["none"]]
    ratio = on.median / off.median
    return [
        Row(
            "11",
            "drain with the run history on",
            f"{ratio:.2f}x history off ({on.median:,.0f} vs {off.median:,.0f}/s)",
            f"≥ {TARGET:g}x history off",
            ratio >= TARGET,
            figures,
            value=ratio,
            details={"tasks": n, "workers": end_to_end.WORKERS, "mode": "drain"},
        )
    ]
