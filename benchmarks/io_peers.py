"""Row 12's driver: one run of one system on one case, in a process of its
own (each system needs its own Django settings).

``python -m benchmarks.io_peers SYSTEM --setup`` prepares the system's
database; ``python -m benchmarks.io_peers SYSTEM --case CASE --tasks N
[--concurrency C] [--processes P]`` fills the system's queue with N tasks
(untimed), starts P worker processes at once (default 1), at concurrency C
or at the system's own default when C is not given, waits until every task
has left its stamp (:mod:`benchmarks.benchapp.work`), stops the workers and
prints one JSON line: the seconds from the first task's start to the last
one's end, the workers' peak RSS (the sum of each one's ``VmHWM`` in
``/proc/<pid>/status``, read at every poll, so a worker that exits on its
own is still measured) and their CPU time per task from the first poll
that saw a task done to the last.

Cases: ``io`` (20 ms sync tasks), ``aio`` (20 ms ``async def`` tasks;
Celery has no ``async def`` tasks, so its threads run the sync ones),
``mixed`` (ten task types on one queue) and ``db`` (one ORM write each).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import common, systems, worker_procs

__all__ = ["CASES", "DATABASES", "OURS", "REDIS_URL", "SYSTEMS", "configure", "drive", "fill"]
__all__ += ["main", "worker_command"]

OURS = "astral-taskclaim"
SYSTEMS = (OURS, "celery", "procrastinate", "django-tasks-db")
CASES = ("io", "aio", "mixed", "db")
PEER = {OURS: "", "celery": "celery", "procrastinate": "procrastinate"}
PEER["django-tasks-db"] = "django_tasks"
DATABASES = {OURS: common.DB_PREFIX, "celery": f"{common.DB_PREFIX}_celery"}
DATABASES |= {name: systems.DATABASES[name] for name in ("procrastinate", "django-tasks-db")}
REDIS_URL = "TASKCLAIM_BENCH_REDIS_URL"
POLL = 0.02

FILL = """
INSERT INTO taskclaim.message (queue, body)
SELECT %(queue)s, (json_build_object(
  'key', %(queue)s || ':' || i, 'claim', gen_random_uuid(), 'windowSeconds', 300,
  'task', json_build_object('k', %(queue)s || ':' || i))::jsonb
  || CASE WHEN %(queue)s = 'mixed' THEN jsonb_build_object(
       'taskName', 'benchmarks.benchapp.tasks.mixed_' || (i %% 10)) ELSE '{}' END)::text
FROM generate_series(0, %(n)s - 1) AS i
"""
CLEAR = {
    OURS: "TRUNCATE taskclaim.message, taskclaim.claim, taskclaim.run",
    "celery": "",
    "procrastinate": "TRUNCATE procrastinate_jobs CASCADE",
    "django-tasks-db": "TRUNCATE django_tasks_database_dbtaskresult",
}


def configure(system: str, url: str, *, migrate: bool = False) -> None:
    """Django in this process on ``system``'s database and settings."""
    if migrate:
        common.setup_django(url, peer=PEER[system])
    else:
        import django

        os.environ.update(TASKCLAIM_BENCH_DATABASE_URL=url, TASKCLAIM_BENCH_PEER=PEER[system])
        os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
        django.setup()
    from benchmarks.benchapp.models import CREATE

    with common.connect(url) as conn:
        conn.execute(CREATE)


def fill(system: str, case: str, url: str, n: int) -> None:
    """Empties the system's queue and bench table, then queues ``n`` tasks."""
    with common.connect(url) as conn:
        conn.execute("TRUNCATE bench_write")
        if CLEAR[system]:
            conn.execute(CLEAR[system])
        if system == OURS:
            conn.execute(FILL, {"queue": case, "n": n})
            conn.execute("VACUUM ANALYZE taskclaim.message")
            return
    keys = [f"{case}:{i}" for i in range(n)]
    if system == "celery":
        import redis

        from benchmarks.benchapp import peer_celery

        redis.Redis.from_url(os.environ[REDIS_URL]).flushdb()
        with peer_celery.app.producer_or_acquire() as producer:
            for i, key in enumerate(keys):
                _task_of(peer_celery, case, i).apply_async((key,), producer=producer)
    elif system == "procrastinate":
        from benchmarks.benchapp import peer_procrastinate as tasks

        if case == "mixed":
            for number, task in enumerate(tasks.MIXED):
                task.batch_defer(*({"k": key} for key in keys[number::10]))
        else:
            task = tasks.aio_sleep if case == "aio" else _task_of(tasks, case, 0)
            task.batch_defer(*({"k": key} for key in keys))
    else:
        from django.db import transaction

        from benchmarks.benchapp import peer_tasks

        with transaction.atomic():
            for i, key in enumerate(keys):
                _task_of(peer_tasks, case, i).enqueue(k=key)


def _task_of(module: Any, case: str, index: int) -> Any:
    """A peer's task for the ``index``-th task of ``case`` (``aio``: the
    sync one, for a peer without ``async def`` tasks)."""
    if case == "mixed":
        return module.MIXED[index % 10]
    return module.db_write if case == "db" else module.io_sleep


def worker_command(system: str, case: str, concurrency: int | None, index: int = 0) -> list[str]:
    """Worker process ``index`` of ``system`` at ``concurrency`` (``None``:
    the system's default), as documented."""
    django = [sys.executable, "-m", "django"]
    width = [] if concurrency is None else ["--concurrency", str(concurrency)]
    if system == OURS:
        options = ("--burst", "--wait", "0", "--verbosity", "0")
        return [*django, "consume_claimed", case, *options, *width]
    if system == "celery":
        queue = case if case in ("mixed", "db") else "io"
        app = ("-A", "benchmarks.benchapp.peer_celery", "worker", "--loglevel", "WARNING")
        # A node name of its own per worker, as Celery's docs ask of several
        # workers on one machine.
        pool = ("--pool", "threads", *width, "--queues", queue, "--hostname", f"bench{index}@%h")
        return [sys.executable, "-m", "celery", *app, *pool]
    if system == "procrastinate":
        return [*django, "procrastinate", "worker", *width, "--queues", case]
    if case == "aio":
        raise ValueError("django-tasks-db runs one task at a time: no concurrency case")
    return [*django, "db_worker", "--interval", "0.01", "--no-startup-delay"]


def _stamps(directory: Path) -> list[list[str]]:
    lines = []
    for path in directory.glob("*.tsv"):
        lines += [line.split("\t") for line in path.read_text().splitlines() if line]
    return lines


def drive(
    system: str,
    case: str,
    url: str,
    *,
    tasks: int,
    concurrency: int | None,
    processes: int = 1,
) -> dict[str, Any]:
    """One timed run (see the module doc); Django is configured already."""
    fill(system, case, url, tasks)
    stamps = Path(tempfile.mkdtemp(prefix="taskclaim-bench-io-"))
    env = dict(os.environ, TASKCLAIM_BENCH_STAMPS=str(stamps), TASKCLAIM_BENCH_PEER=PEER[system])
    env["PYTHONPATH"] = str(common.ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    # Started back to back: the run is timed from its first task's start, so
    # a process that comes up later only has less of the work.
    procs = [
        subprocess.Popen(
            worker_command(system, case, concurrency, index),
            env=env,
            cwd=common.ROOT,
            stdout=subprocess.DEVNULL,
        )
        for index in range(processes)
    ]
    usages = [worker_procs.Usage(proc.pid) for proc in procs]
    deadline = time.monotonic() + 600
    try:
        while True:
            done = len(_stamps(stamps))
            for usage in usages:
                usage.read(tasks_done=done > 0)
            if done >= tasks:
                break
            why = _ended(system, procs)
            # Read again: the last stamps may have landed just before the exit.
            if why and len(_stamps(stamps)) < tasks:
                raise RuntimeError(why)
            if why:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{system} did not run {tasks} tasks within 600 s")
            time.sleep(POLL)
    finally:
        _stop(procs, own_exit=system == OURS)
    lines = _stamps(stamps)
    shutil.rmtree(stamps, ignore_errors=True)
    keys = {line[0] for line in lines}
    if len(keys) != tasks:
        raise RuntimeError(f"{system} ran {len(keys)} distinct tasks of {tasks}")
    start = min(float(line[1]) for line in lines)
    end = max(float(line[2]) for line in lines)
    cpu = [usage.cpu for usage in usages if usage.cpu is not None]
    return {"system": system, "case": case, "tasks": tasks, "concurrency": concurrency} | {
        "processes": processes,
        "seconds": end - start,
        "runs": len(lines),
        "peak_rss": sum(usage.peak for usage in usages),
        "peak_rss_each": [usage.peak for usage in usages],
        "peak_threads": max(usage.threads for usage in usages),
        # The workers' CPU per task while the tasks ran (start-up left out).
        "cpu_ms_per_task": sum(cpu) * 1000 / tasks if cpu else None,
    }


def _ended(system: str, procs: list[subprocess.Popen[bytes]]) -> str:
    """Why the run cannot go on, or ``""``: a worker failed, or all exited."""
    codes = [proc.poll() for proc in procs]
    for index, code in enumerate(codes):
        # Ours exits 0 once the queue is empty (--burst), which may be while
        # another process still runs its last tasks; a peer never exits.
        if code is not None and (code != 0 or system != OURS):
            return f"{system} worker {index} exited with {code} before the end"
    if all(code is not None for code in codes):
        return f"every {system} worker exited before the end"
    return ""


def _stop(procs: list[subprocess.Popen[bytes]], *, own_exit: bool) -> None:
    """Ours drains and exits (``--burst``); the peers are asked to stop."""
    if own_exit:
        deadline = time.monotonic() + 60
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    worker_procs.stop(procs, timeout=20)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.io_peers")
    parser.add_argument("system", choices=SYSTEMS)
    parser.add_argument("--setup", action="store_true", help="prepare the database and exit")
    parser.add_argument("--case", choices=CASES, default="io")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument(
        "--concurrency", type=int, default=None, help="tasks side by side (default: the system's)"
    )
    parser.add_argument("--processes", type=int, default=1, help="worker processes started at once")
    args = parser.parse_args(argv)
    url = os.environ.get("TASKCLAIM_BENCH_DATABASE_URL", "")
    if not url:
        parser.error("TASKCLAIM_BENCH_DATABASE_URL must name the system's database")
    if args.system == "celery" and not os.environ.get(REDIS_URL):
        parser.error(f"celery needs {REDIS_URL} (the harness starts a Redis server)")
    configure(args.system, url, migrate=args.setup)
    if args.setup:
        return 0
    result = drive(
        args.system,
        args.case,
        url,
        tasks=args.tasks,
        concurrency=args.concurrency,
        processes=args.processes,
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
