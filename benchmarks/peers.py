"""The driver process that times one system of row 4 (the systems are in
:mod:`benchmarks.systems`).

``python -m benchmarks.peers SYSTEM --setup`` prepares the system's database;
``python -m benchmarks.peers SYSTEM --mode MODE --tasks N --dedup on|off
--batch B`` times N no-op tasks of distinct keys, enqueued B per call from
``--producers`` threads (asyncio tasks on asyncpg), and prints one JSON line:

- ``enqueue``: no workers; seconds of the enqueues.
- ``e2e``: ``--workers`` processes started, connected and warmed up first;
  seconds from the first enqueue to the queue seen empty, and of the
  enqueues.
- ``drain``: the N tasks enqueued first (untimed, in batches), then the
  workers started at once; seconds from the first worker's connection to
  the queue seen empty, or to ``--drain-limit`` seconds with the tasks
  done by then (``done``).

With ``--rate R`` (e2e) it paces the enqueues at R per second and also
reports each task's delay from the enqueue's commit to its start (row 5;
astral-taskclaim only).

``TASKCLAIM_BENCH_WATCH_URL``, when set, is where the driver itself watches
the queue from (its own prepared queries, ``pg_stat_activity``): the server,
when the system under test reaches it through a pooler.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from . import common, worker_procs
from .systems import APP_NAME, SYSTEMS, WORKER_BATCH, System, pgqueuer_produce, pgqueuer_worker

MODES = ("e2e", "enqueue", "drain")
#: Poll period of the driver's "all done?" check: the finish time is known
#: to within this, in runs of seconds (each poll costs the server a count).
POLL = 0.02
STAMP_DIR = "TASKCLAIM_BENCH_STAMPS"
#: Tasks per call when a drain run fills its queue (untimed).
FILL_BATCH = 1000


def drive(
    system: System,
    *,
    mode: str = "e2e",
    tasks: int,
    dedup: bool,
    workers: int,
    rate: float | None = None,
    tag: str,
    producers: int = 1,
    batch: int = 1,
    managers: int = 1,
    drain_limit: float = 600.0,
    worker_batch: int = WORKER_BATCH,
) -> dict[str, Any]:
    """Times ``tasks`` no-op tasks through ``system`` (see the module doc)."""
    system.open()
    system.clear()
    queue = "latency" if rate else "bench"
    keys = [f"{mode}:{tag}:{i}" for i in range(tasks)]
    chunks = [keys[i : i + batch] for i in range(0, len(keys), batch)]
    result: dict[str, Any] = {"tasks": tasks, "mode": mode, "batch": batch}
    if mode == "enqueue":
        start = time.perf_counter()
        _produce(system, chunks, producers=producers, dedup=dedup, queue=queue)
        result["seconds"] = result["enqueue_seconds"] = time.perf_counter() - start
        system.clear()
        return result
    if mode == "drain":
        fill = [keys[i : i + FILL_BATCH] for i in range(0, len(keys), FILL_BATCH)]
        _produce(system, fill, producers=producers, dedup=dedup, queue=queue)
    stamps = Path(tempfile.mkdtemp(prefix="taskclaim-bench-"))
    env_extra = {STAMP_DIR: str(stamps)}
    procs = [
        subprocess.Popen(
            system.worker_command(queue, managers=managers, batch=worker_batch),
            env={**system.worker_env(i), **env_extra},
            cwd=common.ROOT,
            stdout=subprocess.DEVNULL,
        )
        for i in range(workers)
    ]
    committed: dict[str, float] = {}
    try:
        with common.connect(os.environ.get("TASKCLAIM_BENCH_WATCH_URL") or system.url) as watch:
            if mode == "drain":
                start = _await_workers(watch, 1, procs)
                left = _await_drained(watch, system.pending_sql(), procs, limit=drain_limit)
                result["seconds"] = time.perf_counter() - start
                result["done"] = tasks - left
                return result
            _await_workers(watch, workers, procs)
            warm = [[f"warm:{tag}:{i}"] for i in range(workers * 5)]
            _produce(system, warm, producers=1, dedup=dedup, queue=queue)
            _await_drained(watch, system.pending_sql(), procs)  # every worker has run
            start = time.perf_counter()
            _produce(
                system,
                chunks,
                producers=producers,
                dedup=dedup,
                queue=queue,
                rate=rate,
                start=start,
                committed=committed,
            )
            result["enqueue_seconds"] = time.perf_counter() - start
            _await_drained(watch, system.pending_sql(), procs)
            result["seconds"] = time.perf_counter() - start
    finally:
        worker_procs.stop(procs, timeout=15)
    if rate:
        started: dict[str, float] = {}
        for path in stamps.glob("*.tsv"):
            for line in path.read_text().splitlines():
                key, _, when = line.partition("\t")
                started.setdefault(key, float(when))
        result["latencies_ms"] = sorted(
            (started[key] - at) * 1000 for key, at in committed.items() if key in started
        )
        result["unmatched"] = sum(key not in started for key in committed)
    return result


def _produce(
    system: System,
    chunks: list[list[str]],
    *,
    producers: int,
    dedup: bool,
    queue: str,
    rate: float | None = None,
    start: float = 0.0,
    committed: dict[str, float] | None = None,
) -> None:
    """Enqueues ``chunks`` (one call each) from ``producers`` threads (chunk
    i from thread i mod producers; asyncio tasks for pgqueuer on asyncpg),
    paced at ``rate`` calls per second overall when given, recording when
    each call returned (committed)."""
    if system.asyncpg and not rate:
        asyncio.run(pgqueuer_produce(system.url, chunks, producers=producers, dedup=dedup))
        return
    errors: list[BaseException] = []

    def produce(offset: int) -> None:
        from django.db import connection

        try:
            for i in range(offset, len(chunks), producers):
                if rate:
                    pause = start + i / rate - time.perf_counter()
                    if pause > 0:
                        time.sleep(pause)
                system.enqueue(chunks[i], dedup=dedup, queue=queue)
                if committed is not None:
                    now = time.time()
                    committed.update(dict.fromkeys(chunks[i], now))
        except BaseException as error:  # re-raised below
            errors.append(error)
        finally:
            if system.name not in ("pgqueuer", "pgqueuer-psycopg"):
                connection.close()

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def _await_workers(watch: Any, workers: int, procs: list[subprocess.Popen[bytes]]) -> float:
    """Until ``workers`` worker processes have been seen connected (60 s at
    most); the ``perf_counter()`` when they were. Seen over several looks:
    behind a pooler a server connection carries the name of the worker that
    used it last."""
    deadline = time.monotonic() + 60
    seen: set[str] = set()
    while time.monotonic() < deadline:
        _check_alive(procs)
        rows = watch.execute(
            "SELECT DISTINCT application_name FROM pg_stat_activity WHERE application_name LIKE %s",
            (f"{APP_NAME}-%",),
        ).fetchall()
        seen.update(name for (name,) in rows)
        if len(seen) >= workers:
            return time.perf_counter()
        time.sleep(POLL)
    raise TimeoutError("the workers did not connect within 60 s")


def _await_drained(
    watch: Any, pending_sql: str, procs: list[subprocess.Popen[bytes]], *, limit: float = 0.0
) -> int:
    """Until the queue is empty (600 s at most); with ``limit``, stops after
    that many seconds instead. The tasks left."""
    deadline = time.monotonic() + (limit or 600)
    while True:
        row = watch.execute(pending_sql).fetchone()
        left = int(row[0]) if row else 0
        if left == 0:
            return 0
        if time.monotonic() >= deadline:
            if limit:
                return left
            raise TimeoutError("the workers did not drain the queue within 600 s")
        _check_alive(procs)
        time.sleep(POLL)


def _check_alive(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is not None:
            raise RuntimeError(f"worker {proc.args!r} exited with {proc.returncode}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers")
    parser.add_argument("system", choices=SYSTEMS)
    parser.add_argument("--setup", action="store_true", help="prepare the database and exit")
    parser.add_argument("--worker", action="store_true", help="run a pgqueuer worker")
    parser.add_argument("--mode", choices=MODES, default="e2e")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--managers", type=int, default=1, help="pgqueuer managers per worker")
    parser.add_argument("--worker-batch", type=int, default=WORKER_BATCH)
    parser.add_argument("--batch", type=int, default=1, help="tasks per enqueue call")
    parser.add_argument("--dedup", choices=("on", "off"), default="off")
    parser.add_argument("--producers", type=int, default=1, help="enqueueing threads")
    parser.add_argument("--rate", type=float, default=None, help="enqueue calls per second")
    parser.add_argument("--tag", default="0", help="makes this run's keys unique")
    parser.add_argument("--drain-limit", type=float, default=600.0, help="drain: stop after")
    args = parser.parse_args(argv)
    url = os.environ.get("TASKCLAIM_BENCH_DATABASE_URL", "")
    if not url:
        parser.error("TASKCLAIM_BENCH_DATABASE_URL must name the system's database")
    system = System(args.system, url)
    if args.worker:
        coroutine = pgqueuer_worker(
            args.system, url, managers=args.managers, batch=args.worker_batch
        )
        asyncio.run(coroutine)
        return 0
    if args.setup:
        system.setup()
        return 0
    result = drive(
        system,
        mode=args.mode,
        tasks=args.tasks,
        dedup=args.dedup == "on",
        workers=args.workers,
        rate=args.rate,
        tag=args.tag,
        producers=args.producers,
        batch=args.batch,
        managers=args.managers,
        drain_limit=args.drain_limit,
        worker_batch=args.worker_batch,
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
