"""Row 10, Django Tasks: the same ``@task()`` no-op on this app's
``ClaimTaskBackend`` and on django-tasks-db's ``DatabaseBackend``, both
storing every result: enqueue (``.enqueue()`` from 4 producer threads, no
workers) and drain (a queue filled beforehand, 2 worker processes started
at once: ``consume_claimed`` against ``db_worker`` polling every 10 ms; for
20 s at most, as in row 4).

Target: at least 5x django-tasks-db in both.
"""

from __future__ import annotations

from . import common, end_to_end, systems
from .common import Context, Figure
from .report import Row

TARGET = 5.0
OURS = "astral-taskclaim-tasks"
PEER = "django-tasks-db"
LABELS = {OURS: "ClaimTaskBackend", PEER: "django-tasks-db DatabaseBackend"}


def run(ctx: Context, *, tasks: int = 10_000) -> list[Row]:
    from django.db import connections

    connections.close_all()
    n = ctx.size(tasks, minimum=20)
    urls = {}
    for system in (OURS, PEER):
        urls[system] = common.recreate_database(ctx.server_url, systems.DATABASES[system])
        end_to_end._call(urls[system], [system, "--setup"])
    modes = ("enqueue", "drain")
    figures = {mode: {LABELS[s]: Figure("tasks/s") for s in (OURS, PEER)} for mode in modes}
    for index in range(ctx.runs):
        for mode in modes:
            order = (OURS, PEER) if index % 2 == 0 else (PEER, OURS)
            for system in order:
                result = end_to_end.drive(
                    urls[system],
                    system,
                    tasks=n,
                    dedup=False,
                    tag=f"t{index}",
                    mode=mode,
                    drain_limit=end_to_end.DRAIN_LIMIT,
                )
                done = float(result.get("done", n))  # type: ignore[arg-type]
                figures[mode][LABELS[system]].add(done / float(result["seconds"]))  # type: ignore[arg-type]
    rows = []
    for number, mode in (("10.1", "enqueue"), ("10.2", "drain")):
        ours, peer = figures[mode][LABELS[OURS]], figures[mode][LABELS[PEER]]
        ratio = ours.median / peer.median
        rows.append(
            Row(
                number,
                f"Django Tasks {mode}, results stored",
                f"{ratio:.2f}x django-tasks-db ({ours.median:,.0f} vs {peer.median:,.0f}/s)",
                f"≥ {TARGET:g}x django-tasks-db",
                ratio >= TARGET,
                figures[mode],
                value=ratio,
                details={"tasks": n, "producers": end_to_end.PRODUCERS, "workers": 2},
            )
        )
    return rows
