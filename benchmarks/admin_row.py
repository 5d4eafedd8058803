"""Row 9, the claims admin on 1,000,000 claims: changelist and key-search
response times through the Django test client, and whether the search's
``EXPLAIN`` uses the primary-key index (no sequential scan). The
measuring is :mod:`benchmarks.admin_search`'s; this turns it into a row.
"""

from __future__ import annotations

from . import admin_search
from .common import Context, Figure
from .report import Row


def run(ctx: Context, *, claims: int = 1_000_000) -> list[Row]:
    from django.db import connection

    n = ctx.size(claims, minimum=100)
    result = admin_search.measure(claims=n, repeats=max(3, ctx.runs))
    figures = {}
    for timing in result.timings:
        figure = Figure("ms per page")
        figure.samples = list(timing.samples)
        figures[timing.name] = figure
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE taskclaim.claim")
    by_name = {timing.name: timing.median for timing in result.timings}
    plan = "claim_pkey, no Seq Scan" if result.search_uses_primary_key else "NOT the index"
    return [
        Row(
            "9",
            f"admin on {n:,} claims",
            f"changelist {by_name.get('changelist', float('nan')):.0f} ms, exact search "
            f"{by_name.get('search, exact key', float('nan')):.0f} ms; search plan: {plan}",
            "key search on the primary-key index",
            result.search_uses_primary_key,
            figures,
            details={"search_plan": result.search_plan, "fill_seconds": result.fill_seconds},
        )
    ]
