"""Row 10, Django Tasks: the same ``@task()`` no-op on this app's
``ClaimTaskBackend`` and on django-tasks-db's ``DatabaseBackend``, both
storing every result: enqueue (``.enqueue()`` from 4 producer threads, no
workers) and drain (a queue filled beforehand, 2 worker processes started
at once: ``consume_claimed`` against ``db_worker`` polling every 10 ms; for
20 s at most, as in row 4).

Targets: the enqueue (10.1) at least 0.8x of its floor, the same statement
(claim, message and result row in one) with the same parameters sent by
raw psycopg, prepared, from the same 4 threads: every durable backend pays
a WAL flush per enqueue, so the floor, not a peer, says what is left to
gain (django-tasks-db's rate is shown beside it). The drain (10.2) at least
5x django-tasks-db.
"""

from __future__ import annotations

from . import common, end_to_end, systems
from .common import Context, Figure
from .report import Row

TARGET = 5.0
FLOOR_TARGET = 0.8
OURS = "astral-taskclaim-tasks"
PEER = "django-tasks-db"
FLOOR = systems.FLOOR
LABELS = {
    OURS: "ClaimTaskBackend",
    PEER: "django-tasks-db DatabaseBackend",
    FLOOR: "raw psycopg, the same statement",
}
#: The sides of each mode: the floor is an enqueue only.
SIDES = {"enqueue": (OURS, PEER, FLOOR), "drain": (OURS, PEER)}


def run(ctx: Context, *, tasks: int = 10_000) -> list[Row]:
    from django.db import connections

    connections.close_all()
    n = ctx.size(tasks, minimum=20)
    urls = {}
    for system in (OURS, PEER, FLOOR):
        urls[system] = common.recreate_database(ctx.server_url, systems.DATABASES[system])
        end_to_end._call(urls[system], [system, "--setup"])
    figures = {mode: {LABELS[s]: Figure("tasks/s") for s in SIDES[mode]} for mode in SIDES}
    for index in range(ctx.runs):
        for mode, sides in SIDES.items():
            shift = index % len(sides)
            for system in sides[shift:] + sides[:shift]:
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
    enqueue, drain = figures["enqueue"], figures["drain"]
    ours, peer, floor = (enqueue[LABELS[side]] for side in (OURS, PEER, FLOOR))
    details = {"tasks": n, "producers": end_to_end.PRODUCERS, "workers": 2}
    to_floor = ours.median / floor.median
    drained = drain[LABELS[OURS]].median / drain[LABELS[PEER]].median
    return [
        Row(
            "10.1",
            "Django Tasks enqueue, results stored",
            f"{to_floor:.2f}x its floor ({ours.median:,.0f} vs {floor.median:,.0f}/s); "
            f"{ours.median / peer.median:.2f}x django-tasks-db ({peer.median:,.0f}/s)",
            f"≥ {FLOOR_TARGET:g}x the floor",
            to_floor >= FLOOR_TARGET,
            enqueue,
            value=to_floor,
            details=details,
        ),
        Row(
            "10.2",
            "Django Tasks drain, results stored",
            f"{drained:.2f}x django-tasks-db ({drain[LABELS[OURS]].median:,.0f} vs "
            f"{drain[LABELS[PEER]].median:,.0f}/s)",
            f"≥ {TARGET:g}x django-tasks-db",
            drained >= TARGET,
            drain,
            value=drained,
            details=details,
        ),
    ]
