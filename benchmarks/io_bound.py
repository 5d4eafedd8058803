"""Row 12, tasks side by side, against the peers at their maintainers'
settings, in the same run (:mod:`benchmarks.io_peers` drives each run in a
process of its own):

- 12.1: 1,000 tasks that wait 20 ms (an HTTP call's stand-in), one worker
  process at concurrency 10: ``consume_claimed --concurrency 10`` against
  Celery (threads pool, ``-c 10``, Redis broker), procrastinate
  (``--concurrency 10``, sync and ``async def`` tasks) and django-tasks-db
  (``db_worker``, which runs one task at a time). The limit is
  10 / 0.020 s = 500/s. Targets: ≥ 0.95x the limit, ≥ 1.0x the best peer,
  peak RSS ≤ 1.2x the best peer's.
- 12.2: the same with ``async def`` tasks at concurrency 100, against
  procrastinate's ``async def`` at 100 and Celery's threads pool at 100
  (Celery has no ``async def`` tasks; its threads run the sync ones).
  Target: ≥ 1.5x the best peer.
- 12.3: ten task types on one queue (six waits, two ORM writes, two bits of
  CPU), one command each side, concurrency 10. Target: ≥ 1.2x the best peer.
- 12.4: 2,000 short database-bound tasks (one ORM write each, a row
  inserted), **two** worker processes per side started at once, each at its
  default concurrency: ``consume_claimed`` (1), Celery's threads pool (the
  number of cores), procrastinate (1), ``db_worker`` (one at a time).
  Target: ≥ 2x the best peer. Peak RSS and CPU are the two workers' sum.

Each run's time is its tasks' own (first start to last end, from the
stamps they leave), so worker start-up is not counted; the variants of a
case run interleaved, the order rotating from run to run. Row 12.1 also
times its floor in the same runs: ten bare threads that each wait 20 ms in
turn, no queue at all, which is what the machine allows (timer slack and
thread wake-ups), below the 500/s of the arithmetic. The Redis server
Celery needs is started here (:mod:`benchmarks.redis_server`); without
``redis-server`` or a peer's package the row runs without that peer, and
says so.
"""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass

from . import common, io_peers, redis_server
from .benchapp import work
from .common import Context, Figure
from .report import Row

__all__ = ["CASES", "PACKAGES", "RSS_TARGET", "Case", "run"]

OURS = io_peers.OURS
#: The Python package each system needs (absent: the system is left out).
PACKAGES = {"celery": "celery", "procrastinate": "procrastinate"}
PACKAGES["django-tasks-db"] = "django_tasks_db"


@dataclass(frozen=True)
class Case:
    """One case of the row: its workload and the sides that run it."""

    number: str
    case: str
    #: Tasks side by side per worker process; ``None``: each side's default.
    concurrency: int | None
    title: str
    #: Tasks per second when every task waits 20 ms, if that is the bound.
    limit: float | None
    #: Target over the best peer.
    target: float
    #: (system, label) of every side, ours first.
    sides: tuple[tuple[str, str], ...]
    #: Tasks per run at scale 1.
    tasks: int = 1000
    #: Worker processes per side, started at once.
    processes: int = 1


CASES = (
    Case(
        "12.1",
        "io",
        10,
        "20 ms sync tasks, one process, concurrency 10",
        500.0,
        1.0,
        (
            (OURS, "consume_claimed --concurrency 10"),
            ("celery", "Celery threads -c 10 (Redis)"),
            ("procrastinate", "procrastinate --concurrency 10, sync"),
            ("procrastinate:aio", "procrastinate --concurrency 10, async def"),
            ("django-tasks-db", "django-tasks-db db_worker (one at a time)"),
        ),
    ),
    Case(
        "12.2",
        "aio",
        100,
        "20 ms async def tasks, one process, concurrency 100",
        5000.0,
        1.5,
        (
            (OURS, "consume_claimed --concurrency 100, async def"),
            ("procrastinate", "procrastinate --concurrency 100, async def"),
            ("celery", "Celery threads -c 100, sync (Redis)"),
        ),
    ),
    Case(
        "12.3",
        "mixed",
        10,
        "10 task types on one queue, one command, concurrency 10",
        None,
        1.2,
        (
            (OURS, "consume_claimed --concurrency 10"),
            ("celery", "Celery threads -c 10 (Redis)"),
            ("procrastinate", "procrastinate --concurrency 10"),
            ("django-tasks-db", "django-tasks-db db_worker (one at a time)"),
        ),
    ),
    Case(
        "12.4",
        "db",
        None,
        "one-row ORM writes, 2 processes each, default concurrency",
        None,
        2.0,
        (
            (OURS, "consume_claimed x2 (default concurrency 1)"),
            ("celery", "Celery threads x2 (default -c = cores, Redis)"),
            ("procrastinate", "procrastinate x2 (default concurrency 1)"),
            ("django-tasks-db", "django-tasks-db db_worker x2 (one at a time)"),
        ),
        tasks=2000,
        processes=2,
    ),
)
RSS_TARGET = 1.2


def _call(system: str, url: str, args: list[str], redis_url: str) -> dict[str, object]:
    env = {io_peers.REDIS_URL: redis_url} if redis_url else None
    stdout = common.run_module("benchmarks.io_peers", [system, *args], url, env)
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def _missing(system: str) -> str:
    """Why ``system`` cannot run here, or ``""``."""
    package = PACKAGES.get(system)
    if package and importlib.util.find_spec(package) is None:
        return f"{system} not installed (the bench extra)"
    if system == "celery" and not redis_server.available():
        return "celery left out: redis-server not installed (Debian: redis-server)"
    return ""


def run(ctx: Context, *, tasks: int | None = None, cases: tuple[Case, ...] = CASES) -> list[Row]:
    """Every case of ``cases``, at ``tasks`` tasks a run if given (each
    case's own count otherwise), times the scale."""
    from django.db import connections

    connections.close_all()  # the workers share our database
    wanted = {side.split(":")[0] for case in cases for side, _ in case.sides}
    notes = {system: _missing(system) for system in sorted(wanted)}
    present = {system for system, why in notes.items() if not why}
    urls = {OURS: ctx.database_url}
    with ExitStack() as stack:
        redis_url = stack.enter_context(redis_server.running()) if "celery" in present else ""
        for system in sorted(present - {OURS}):
            name = io_peers.DATABASES[system]
            urls[system] = common.recreate_database(ctx.server_url, name)
            _call(system, urls[system], ["--setup"], redis_url)
        _call(OURS, urls[OURS], ["--setup"], redis_url)
        rows = []
        for case in cases:
            n = ctx.size(tasks or case.tasks, minimum=20)
            sides = [(s, label) for s, label in case.sides if s.split(":")[0] in present]
            rate = {label: Figure("tasks/s") for _, label in sides}
            rss = {label: Figure("MiB") for _, label in sides}
            cpu = {label: Figure("CPU ms/task") for _, label in sides}
            threads: dict[str, int] = {}
            floor = Figure("tasks/s")
            for index in range(ctx.runs):
                if case.case == "io" and case.concurrency:
                    floor.add(_threads_floor(n, case.concurrency))
                shift = index % len(sides)
                for side, label in sides[shift:] + sides[:shift]:
                    system, _, flavour = side.partition(":")
                    args = ["--case", flavour or case.case, "--tasks", str(n)]
                    args += ["--processes", str(case.processes)]
                    if case.concurrency is not None:
                        args += ["--concurrency", str(case.concurrency)]
                    result = _call(system, urls[system], args, redis_url)
                    rate[label].add(n / float(result["seconds"]))  # type: ignore[arg-type]
                    rss[label].add(int(result["peak_rss"]) / 2**20)  # type: ignore[call-overload]
                    if result.get("cpu_ms_per_task") is not None:
                        cpu[label].add(float(result["cpu_ms_per_task"]))  # type: ignore[arg-type]
                    most = int(result.get("peak_threads", 0))  # type: ignore[call-overload]
                    threads[label] = max(threads.get(label, 0), most)
            absent = [why for system, why in notes.items() if why]
            rows.append(_row(case, sides, rate, rss, n, absent, floor))
            rows[-1].details["cpu_ms_per_task"] = {
                label: figure.median for label, figure in cpu.items() if figure.samples
            }
            # The most threads one worker process had, over the runs.
            rows[-1].details["peak_threads"] = threads
    return rows


def _threads_floor(n: int, concurrency: int) -> float:
    """Waits per second of ``concurrency`` bare threads that wait
    :data:`~benchmarks.benchapp.work.IO_SECONDS` in turn, ``n`` waits in
    all: 12.1's work with no queue, the most this machine allows it."""

    def lane(count: int) -> None:
        for _ in range(count):
            time.sleep(work.IO_SECONDS)

    counts = [n // concurrency + (i < n % concurrency) for i in range(concurrency)]
    lanes = [threading.Thread(target=lane, args=(count,)) for count in counts]
    started = time.perf_counter()
    for thread in lanes:
        thread.start()
    for thread in lanes:
        thread.join()
    return n / (time.perf_counter() - started)


def _row(
    case: Case,
    sides: list[tuple[str, str]],
    rate: dict[str, Figure],
    rss: dict[str, Figure],
    n: int,
    absent: list[str],
    floor: Figure,
) -> Row:
    ours = sides[0][1]
    peers = [label for _, label in sides[1:]]
    parts = [f"{rate[ours].median:,.0f}/s"]
    holds: bool | None = None
    value = None
    if case.limit:
        share = rate[ours].median / case.limit
        parts.append(f"{share:.2f}x the {case.limit:,.0f}/s limit")
    if floor.samples:
        parts.append(f"{rate[ours].median / floor.median:.2f}x bare threads' {floor.median:,.0f}/s")
    if peers:
        best = max(peers, key=lambda label: rate[label].median)
        value = rate[ours].median / rate[best].median
        memory = rss[ours].median / rss[best].median
        parts.append(f"{value:.2f}x best peer ({best}: {rate[best].median:,.0f}/s)")
        parts.append(
            f"peak RSS {rss[ours].median:.0f} MiB, {memory:.2f}x the best peer's "
            f"({rss[best].median:.0f} MiB)"
        )
        holds = value >= case.target
        if case.number == "12.1":
            holds = holds and share >= 0.95 and memory <= RSS_TARGET
    target = f"≥ {case.target:g}x best peer"
    if case.number == "12.1":
        target = f"≥ 0.95x limit, {target}, RSS ≤ {RSS_TARGET:g}x"
    ratios = {label: rate[ours].median / rate[label].median for label in peers}
    return Row(
        case.number,
        case.title,
        "; ".join(parts),
        target,
        holds,
        rate,
        value=value,
        note="; ".join(absent),
        details={
            "tasks": n,
            "concurrency": case.concurrency,
            "processes": case.processes,
            "ratio_to_each_peer": ratios,
            "bare_threads_per_s": floor.as_dict() if floor.samples else None,
            "peak_rss_mib": {label: figure.as_dict() for label, figure in rss.items()},
            "rss_ratio_to_each_peer": {
                label: rss[ours].median / rss[label].median for label in peers
            },
        },
    )
