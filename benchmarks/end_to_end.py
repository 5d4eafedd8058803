"""Row 4, end to end: no-op tasks of distinct keys enqueued by 4 producer
threads and run by 2 worker processes, on a PostgreSQL queue, from the
first enqueue to the last task done. astral-taskclaim against pgqueuer
(psycopg driver), procrastinate (its Django integration) and
django-tasks-db, same server, same run, each in its own database.

Row 4.1 turns each peer's dedup feature on (pgqueuer ``dedupe_key``,
procrastinate ``queueing_lock``); row 4.2 turns it off (django-tasks-db
has none, so it is in 4.2 only). astral-taskclaim claims every key in
both rows: claims are what it is for.

Target: at least 1.5x the best peer in each row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from . import common, peers
from .common import Context, Figure
from .report import Row

TARGET = 1.5
OURS = "astral-taskclaim"
WORKERS = 2
PRODUCERS = 4


def setup(ctx: Context) -> dict[str, str]:
    """Fresh databases for the peers; each system's URL."""
    urls = {OURS: ctx.database_url}
    for system in peers.SYSTEMS:
        if system == OURS:
            continue
        urls[system] = common.recreate_database(ctx.server_url, peers.DATABASES[system])
        _call(urls[system], [system, "--setup"])
    return urls


def _call(url: str, args: list[str]) -> str:
    env = dict(os.environ, TASKCLAIM_BENCH_DATABASE_URL=url)
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.peers", *args],
        env=env,
        cwd=common.ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"benchmarks.peers {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def drive(
    url: str,
    system: str,
    *,
    tasks: int,
    dedup: bool,
    tag: str,
    rate: float | None = None,
    producers: int = PRODUCERS,
) -> dict[str, object]:
    """One timed run of ``system`` in its own process (see :mod:`benchmarks.peers`)."""
    args = [
        system,
        "--tasks",
        str(tasks),
        "--workers",
        str(WORKERS),
        "--dedup",
        "on" if dedup else "off",
        "--tag",
        tag,
        "--producers",
        str(producers),
    ]
    if rate:
        args += ["--rate", str(rate)]
    lines = [line for line in _call(url, args).splitlines() if line.startswith("{")]
    result: dict[str, object] = json.loads(lines[-1])
    return result


def run(ctx: Context, *, tasks: int = 3000) -> list[Row]:
    from django.db import connections

    connections.close_all()  # the driver's workers share our database
    n = ctx.size(tasks, minimum=20)
    urls = setup(ctx)
    variants = [(OURS, True)] + [
        (system, dedup)
        for system in peers.SYSTEMS
        if system != OURS
        for dedup in ((True, False) if system in peers.DEDUP else (False,))
    ]
    figures = {_label(s, d): Figure("tasks/s") for s, d in variants}
    enqueue = {_label(s, d): Figure("enqueues/s") for s, d in variants}
    for index, (system, dedup) in common.interleave(ctx.runs, variants):
        result = drive(urls[system], system, tasks=n, dedup=dedup, tag=f"{index}")
        figures[_label(system, dedup)].add(n / float(result["seconds"]))  # type: ignore[arg-type]
        enqueue[_label(system, dedup)].add(n / float(result["enqueue_seconds"]))  # type: ignore[arg-type]
    ours = figures[_label(OURS, True)]
    ctx.shared["max_rate"] = ours.median
    rows = []
    for number, dedup in (("4.1", True), ("4.2", False)):
        peer_labels = [_label(s, d) for s, d in variants if s != OURS and d == dedup]
        best = max(peer_labels, key=lambda label: figures[label].median)
        ratio = ours.median / figures[best].median
        shown = {_label(OURS, True): ours} | {label: figures[label] for label in peer_labels}
        rows.append(
            Row(
                number,
                f"end to end, peers' dedup {'on' if dedup else 'off'}",
                f"{ratio:.2f}x best peer ({ours.median:,.0f} vs {figures[best].median:,.0f}/s, "
                f"{best})",
                f"≥ {TARGET}x best peer",
                ratio >= TARGET,
                shown,
                value=ratio,
                details={
                    "tasks": n,
                    "workers": WORKERS,
                    "producers": PRODUCERS,
                    "enqueue_rates": {k: v.as_dict() for k, v in enqueue.items()},
                },
            )
        )
    return rows


def _label(system: str, dedup: bool) -> str:
    if system == OURS:
        return "astral-taskclaim (claims)"
    if system not in peers.DEDUP:
        return system
    return f"{system} ({'dedup' if dedup else 'no dedup'})"
