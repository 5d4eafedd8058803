"""Row 12's driver: one run of one system on one case, in a process of its
own (each system needs its own Django settings).

``python -m benchmarks.io_peers SYSTEM --setup`` prepares the system's
database; ``python -m benchmarks.io_peers SYSTEM --case CASE --tasks N
--concurrency C`` fills the system's queue with N tasks (untimed), starts
one worker process at concurrency C, waits until every task has left its
stamp (:mod:`benchmarks.benchapp.work`), stops the worker and prints one
JSON line: the seconds from the first task's start to the last one's end,
the worker's peak RSS (``VmHWM`` in ``/proc/<pid>/status``, read at
every poll, so a worker that exits on its own is still measured) and its
CPU time per task from the first poll that saw a task done to the last.

Cases: ``io`` (20 ms sync tasks), ``aio`` (20 ms ``async def`` tasks;
Celery has no ``async def`` tasks, so its threads run the sync ones) and
``mixed`` (ten task types on one queue).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import common, systems

OURS = "astral-taskclaim"
SYSTEMS = (OURS, "celery", "procrastinate", "django-tasks-db")
CASES = ("io", "aio", "mixed")
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
                task = peer_celery.MIXED[i % 10] if case == "mixed" else peer_celery.io_sleep
                task.apply_async((key,), producer=producer)
    elif system == "procrastinate":
        from benchmarks.benchapp import peer_procrastinate as tasks

        if case == "mixed":
            for number, task in enumerate(tasks.MIXED):
                task.batch_defer(*({"k": key} for key in keys[number::10]))
        else:
            (tasks.aio_sleep if case == "aio" else tasks.io_sleep).batch_defer(
                *({"k": key} for key in keys)
            )
    else:
        from django.db import transaction

        from benchmarks.benchapp import peer_tasks

        with transaction.atomic():
            for i, key in enumerate(keys):
                task = peer_tasks.MIXED[i % 10] if case == "mixed" else peer_tasks.io_sleep
                task.enqueue(k=key)


def worker_command(system: str, case: str, concurrency: int) -> list[str]:
    """One worker process of ``system`` at ``concurrency``, as documented."""
    django = [sys.executable, "-m", "django"]
    width = str(concurrency)
    if system == OURS:
        options = ("--burst", "--wait", "0", "--verbosity", "0", "--concurrency", width)
        return [*django, "consume_claimed", case, *options]
    if system == "celery":
        queue = "mixed" if case == "mixed" else "io"
        app = ("-A", "benchmarks.benchapp.peer_celery", "worker", "--loglevel", "WARNING")
        pool = ("--pool", "threads", "--concurrency", width, "--queues", queue)
        return [sys.executable, "-m", "celery", *app, *pool]
    if system == "procrastinate":
        return [*django, "procrastinate", "worker", "--concurrency", width, "--queues", case]
    if case == "aio":
        raise ValueError("django-tasks-db runs one task at a time: no concurrency case")
    return [*django, "db_worker", "--interval", "0.01", "--no-startup-delay"]


def _stamps(directory: Path) -> list[list[str]]:
    lines = []
    for path in directory.glob("*.tsv"):
        lines += [line.split("\t") for line in path.read_text().splitlines() if line]
    return lines


def _peak_rss(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of process ``pid`` so far."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after the command name
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drive(system: str, case: str, url: str, *, tasks: int, concurrency: int) -> dict[str, Any]:
    """One timed run (see the module doc); Django is configured already."""
    fill(system, case, url, tasks)
    stamps = Path(tempfile.mkdtemp(prefix="taskclaim-bench-io-"))
    env = dict(os.environ, TASKCLAIM_BENCH_STAMPS=str(stamps), TASKCLAIM_BENCH_PEER=PEER[system])
    env["PYTHONPATH"] = str(common.ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    command = worker_command(system, case, concurrency)
    proc = subprocess.Popen(command, env=env, cwd=common.ROOT, stdout=subprocess.DEVNULL)
    peak = 0
    # CPU time at the first poll that saw a task done, and at the last.
    first_cpu: float | None = None
    last_cpu: float | None = None
    deadline = time.monotonic() + 600
    try:
        while True:
            peak = max(peak, _peak_rss(proc.pid))
            done = len(_stamps(stamps))
            now = _cpu_seconds(proc.pid) if done else None
            if now is not None:
                first_cpu = now if first_cpu is None else first_cpu
                last_cpu = now
            if done >= tasks:
                break
            if proc.poll() is not None:
                raise RuntimeError(f"{command[2:5]} exited with {proc.returncode} before the end")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{system} did not run {tasks} tasks within 600 s")
            time.sleep(POLL)
    finally:
        _stop(proc, own_exit=system == OURS)
    lines = _stamps(stamps)
    shutil.rmtree(stamps, ignore_errors=True)
    keys = {line[0] for line in lines}
    if len(keys) != tasks:
        raise RuntimeError(f"{system} ran {len(keys)} distinct tasks of {tasks}")
    start = min(float(line[1]) for line in lines)
    end = max(float(line[2]) for line in lines)
    return {"system": system, "case": case, "tasks": tasks, "concurrency": concurrency} | {
        "seconds": end - start,
        "runs": len(lines),
        "peak_rss": peak,
        # The worker's CPU per task while the tasks ran (start-up left out).
        "cpu_ms_per_task": None
        if first_cpu is None or last_cpu is None
        else (last_cpu - first_cpu) * 1000 / tasks,
    }


def _stop(proc: subprocess.Popen[bytes], *, own_exit: bool) -> None:
    """Ours drains and exits (``--burst``); the peers are asked to stop."""
    if own_exit:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=60)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.io_peers")
    parser.add_argument("system", choices=SYSTEMS)
    parser.add_argument("--setup", action="store_true", help="prepare the database and exit")
    parser.add_argument("--case", choices=CASES, default="io")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args(argv)
    url = os.environ.get("TASKCLAIM_BENCH_DATABASE_URL", "")
    if not url:
        parser.error("TASKCLAIM_BENCH_DATABASE_URL must name the system's database")
    if args.system == "celery" and not os.environ.get(REDIS_URL):
        parser.error(f"celery needs {REDIS_URL} (the harness starts a Redis server)")
    configure(args.system, url, migrate=args.setup)
    if args.setup:
        return 0
    result = drive(args.system, args.case, url, tasks=args.tasks, concurrency=args.concurrency)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
