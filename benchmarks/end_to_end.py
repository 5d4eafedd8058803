"""Row 4, astral-taskclaim against its peers (:mod:`benchmarks.systems`),
no-op tasks of distinct keys on a PostgreSQL queue, in five parts, each
with the peers' dedup on and off:

- **enqueue single** (4.1, 4.2): one task per call from 4 producer
  threads, no workers running.
- **enqueue batched** (4.3, 4.4): 10 tasks per call, ``enqueue_claimed_many``
  against pgqueuer's list ``enqueue`` and procrastinate's ``batch_defer``
  (which cannot dedup distinct keys, so it is in 4.4 only; django-tasks
  has no batch enqueue).
- **drain** (4.5, 4.6): a queue of 100,000 filled beforehand, 2 worker
  processes started at once, from the first worker's connection to the
  queue empty, or for 20 s at most (then the tasks done by then count).
- **end to end** (4.7, 4.8 single; 4.9, 4.10 batched): 4 producers and 2
  workers at once, from the first enqueue to the last task done.

astral-taskclaim claims every key in every part: claims are what it is for.
Row 4.11 runs pgqueuer at its own benchmark tool's settings (1 enqueuer of
batches of 10, 5 queue managers taking batches of 10) for comparison with
that tool's figure. Each figure is the median of ``--runs`` interleaved runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from . import common, systems
from .common import Context, Figure
from .report import Row

OURS = "astral-taskclaim"
WORKERS = 2
PRODUCERS = 4
BATCH = 10
#: A drain run stops after this many seconds (the rate is the tasks done by
#: then over the time), so the slowest peer does not take an hour per run.
DRAIN_LIMIT = 20.0


@dataclass(frozen=True)
class Part:
    """One part of row 4: how it is driven and its target."""

    number: int
    mode: str
    batch: int
    title: str
    target: float
    peers: tuple[str, ...]
    #: Row 4.x scales this many tasks (the drain's prefilled queue is larger).
    tasks: int = 10_000


ALL_PEERS = ("pgqueuer", "pgqueuer-psycopg", "procrastinate", "django-tasks-db")
PEERS = ("pgqueuer", "procrastinate", "django-tasks-db")
PARTS = (
    Part(1, "enqueue", 1, "enqueue single", 1.2, PEERS),
    Part(2, "enqueue", BATCH, f"enqueue batched ({BATCH})", 1.5, ("pgqueuer", "procrastinate")),
    Part(3, "drain", 1, "drain", 2.0, ("pgqueuer", "procrastinate", "django-tasks-db"), 100_000),
    Part(4, "e2e", 1, "end to end single", 1.3, ALL_PEERS),
    Part(5, "e2e", BATCH, f"end to end batched ({BATCH})", 1.5, ("pgqueuer", "procrastinate")),
)


def setup(ctx: Context) -> dict[str, str]:
    """Fresh databases for the peers; each system's URL."""
    urls = {OURS: ctx.database_url}
    for system in systems.SYSTEMS:
        if system == OURS:
            continue
        urls[system] = common.recreate_database(ctx.server_url, systems.DATABASES[system])
        _call(urls[system], [system, "--setup"])
    return urls


def _call(url: str, args: list[str]) -> str:
    return common.run_module("benchmarks.peers", args, url)


def drive(
    url: str,
    system: str,
    *,
    tasks: int,
    dedup: bool,
    tag: str,
    mode: str = "e2e",
    batch: int = 1,
    rate: float | None = None,
    producers: int = PRODUCERS,
    workers: int = WORKERS,
    managers: int = 1,
    drain_limit: float | None = None,
    worker_batch: int | None = None,
) -> dict[str, object]:
    """One timed run of ``system`` in its own process (see :mod:`benchmarks.peers`)."""
    args = [system, "--mode", mode, "--tasks", str(tasks), "--workers", str(workers)]
    args += ["--dedup", "on" if dedup else "off", "--tag", tag, "--batch", str(batch)]
    args += ["--producers", str(producers), "--managers", str(managers)]
    if rate:
        args += ["--rate", str(rate)]
    if drain_limit:
        args += ["--drain-limit", str(drain_limit)]
    if worker_batch:
        args += ["--worker-batch", str(worker_batch)]
    lines = [line for line in _call(url, args).splitlines() if line.startswith("{")]
    result: dict[str, object] = json.loads(lines[-1])
    return result


def variants(part: Part) -> list[tuple[str, bool]]:
    """``(system, dedup)`` pairs of a part, ours first."""
    out = [(OURS, True)]
    for system in part.peers:
        for dedup in (True, False):
            if dedup and system not in systems.DEDUP:
                continue
            if dedup and part.batch > 1 and not systems.BATCH_DEDUP.get(system, False):
                continue
            out.append((system, dedup))
    return out


def run(ctx: Context, *, tasks: int | None = None, parts: tuple[Part, ...] = PARTS) -> list[Row]:
    from django.db import connections

    connections.close_all()  # the driver's workers share our database
    urls = setup(ctx)
    figures: dict[int, dict[str, Figure]] = {
        p.number: {_label(s, d): Figure("tasks/s") for s, d in variants(p)} for p in parts
    }
    sizes = {p.number: ctx.size(tasks or p.tasks, minimum=20) for p in parts}
    for index in range(ctx.runs):
        for part in parts:
            order = variants(part)
            shift = index % len(order)
            for system, dedup in order[shift:] + order[:shift]:
                result = drive(
                    urls[system],
                    system,
                    tasks=sizes[part.number],
                    dedup=dedup,
                    tag=f"{index}",
                    mode=part.mode,
                    batch=part.batch,
                    drain_limit=DRAIN_LIMIT,
                )
                done = float(result.get("done", sizes[part.number]))  # type: ignore[arg-type]
                seconds = float(result["seconds"])  # type: ignore[arg-type]
                figures[part.number][_label(system, dedup)].add(done / seconds)
    e2e = next((p for p in parts if p.mode == "e2e" and p.batch == 1), None)
    if e2e is not None:
        ctx.shared["max_rate"] = figures[e2e.number][_label(OURS, True)].median
    rows = [
        _row(part, dedup, figures[part.number], sizes[part.number])
        for part in parts
        for dedup in (True, False)
    ]
    rows.append(_pgqueuer_tool_settings(ctx, urls["pgqueuer"], sizes))
    return rows


def _row(part: Part, dedup: bool, figures: dict[str, Figure], size: int) -> Row:
    ours = figures[_label(OURS, True)]
    peers = [_label(s, d) for s, d in variants(part) if s != OURS and d == dedup]
    best = max(peers, key=lambda label: figures[label].median)
    ratio = ours.median / figures[best].median
    number = f"4.{2 * part.number - (1 if dedup else 0)}"
    return Row(
        number,
        f"{part.title}, peers' dedup {'on' if dedup else 'off'}",
        f"{ratio:.2f}x best peer ({ours.median:,.0f} vs {figures[best].median:,.0f}/s, {best})",
        f"≥ {part.target:g}x best peer",
        ratio >= part.target,
        {_label(OURS, True): ours} | {label: figures[label] for label in peers},
        value=ratio,
        details={
            "tasks": size,
            "mode": part.mode,
            "tasks_per_call": part.batch,
            "workers": WORKERS if part.mode != "enqueue" else 0,
            "producers": PRODUCERS,
            "worker_batch": systems.WORKER_BATCH,
        },
    )


def _pgqueuer_tool_settings(ctx: Context, url: str, sizes: dict[int, int]) -> Row:
    """pgqueuer alone at its benchmark tool's defaults, through this harness."""
    figure = Figure("tasks/s")
    n = min(sizes.values())
    for index in range(ctx.runs):
        result = drive(
            url,
            "pgqueuer",
            tasks=n,
            dedup=False,
            tag=f"tool{index}",
            batch=10,
            producers=1,
            workers=1,
            managers=5,
            worker_batch=10,
        )
        figure.add(n / float(result["seconds"]))  # type: ignore[arg-type]
    return Row(
        "4.11",
        "pgqueuer at its benchmark tool's settings",
        f"{figure.median:,.0f} tasks/s",
        "recorded",
        None,
        {"pgqueuer (asyncpg), 1x10 in, 5x10 out": figure},
        value=figure.median,
        note="compare with pgqueuer's tools/benchmark.py on the same machine",
        details={"tasks": n, "enqueuers": 1, "enqueue_batch": 10, "managers": 5, "batch": 10},
    )


def _label(system: str, dedup: bool) -> str:
    if system == OURS:
        return "astral-taskclaim (claims)"
    name = "pgqueuer (asyncpg)" if system == "pgqueuer" else system
    if system not in systems.DEDUP:
        return name
    return f"{name} ({'dedup' if dedup else 'no dedup'})"
