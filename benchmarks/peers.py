"""The systems of row 4, each behind the same small interface, and the
driver process that times one of them.

``python -m benchmarks.peers SYSTEM --setup`` prepares the system's database;
``python -m benchmarks.peers SYSTEM --tasks N --dedup on|off`` starts its
workers (``--workers`` processes), waits until they are connected and have
run a warm-up, enqueues N no-op tasks of distinct keys from this process,
and prints one JSON line: seconds from the first enqueue to the last task
done, and seconds spent enqueueing. With ``--rate R`` it paces the enqueues
at R per second and also reports each task's delay from the enqueue's
commit to its start (row 5; astral-taskclaim only).

Every system runs in its own database on the same server, with its workers
started the way its docs say (a management command or its CLI).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from . import common

SYSTEMS = ("astral-taskclaim", "pgqueuer", "procrastinate", "django-tasks-db")
#: Systems with a dedup feature (procrastinate ``queueing_lock``, pgqueuer
#: ``dedupe_key``); astral-taskclaim always claims.
DEDUP = {"astral-taskclaim", "pgqueuer", "procrastinate"}
DATABASES = {
    "astral-taskclaim": common.DB_PREFIX,
    "pgqueuer": f"{common.DB_PREFIX}_pgqueuer",
    "procrastinate": f"{common.DB_PREFIX}_procrastinate",
    "django-tasks-db": f"{common.DB_PREFIX}_django_tasks",
}
DJANGO_PEER = {
    "astral-taskclaim": "",
    "procrastinate": "procrastinate",
    "django-tasks-db": "django_tasks",
}
APP_NAME = "taskclaim-bench-worker"
#: Poll period of the driver's "all done?" check: the finish time is known
#: to within this.
POLL = 0.005
STAMP_DIR = "TASKCLAIM_BENCH_STAMPS"


def database_url(server_url: str, system: str) -> str:
    return common.with_database(server_url, DATABASES[system])


# -- per-system pieces ---------------------------------------------------------


class System:
    """One system: set-up, enqueue, the pending count, the worker command."""

    def __init__(self, name: str, url: str) -> None:
        self.name = name
        self.url = url
        self._local = threading.local()

    def setup(self) -> None:
        if self.name == "pgqueuer":
            asyncio.run(_pgqueuer_install(self.url))
        else:
            common.setup_django(self.url, peer=DJANGO_PEER[self.name])

    def open(self) -> None:
        """Prepares this process to enqueue (Django or a plain connection)."""
        if self.name == "pgqueuer":
            from pgqueuer.adapters.drivers.psycopg import SyncPsycopgDriver
            from pgqueuer.adapters.persistence.queries import SyncQueries

            def queries() -> Any:
                local = self._local
                if not hasattr(local, "queries"):
                    local.conn = common.connect(self.url)
                    local.queries = SyncQueries(SyncPsycopgDriver(local.conn))
                return local.queries

            self._pgq = queries
        else:
            common.setup_django(self.url, peer=DJANGO_PEER[self.name])

    def clear(self) -> None:
        tables = {
            "astral-taskclaim": "taskclaim.message, taskclaim.claim",
            "pgqueuer": "pgqueuer, pgqueuer_log",
            "procrastinate": "procrastinate_jobs CASCADE",
            "django-tasks-db": "django_tasks_database_dbtaskresult",
        }[self.name]
        with common.connect(self.url) as conn:
            conn.execute(f"TRUNCATE {tables}")

    def enqueue(self, key: str, *, dedup: bool, queue: str = "bench") -> None:
        if self.name == "astral-taskclaim":
            from astral_taskclaim.claims import enqueue_claimed
            from astral_taskclaim.queues import queues

            enqueue_claimed(queues[queue], key, {"k": key}, window_seconds=300)
        elif self.name == "pgqueuer":
            payload = key.encode()
            self._pgq().enqueue("bench_noop", payload, dedupe_key=key if dedup else None)
        elif self.name == "procrastinate":
            from benchmarks.benchapp.peer_procrastinate import noop

            if dedup:
                noop.configure(queueing_lock=key).defer(k=key)
            else:
                noop.defer(k=key)
        else:
            from benchmarks.benchapp.peer_django_tasks import noop as task

            task.enqueue(k=key)

    def pending_sql(self) -> str:
        return {
            "astral-taskclaim": "SELECT count(*) FROM taskclaim.message",
            "pgqueuer": "SELECT count(*) FROM pgqueuer",
            "procrastinate": "SELECT count(*) FROM procrastinate_jobs "
            "WHERE status IN ('todo', 'doing')",
            "django-tasks-db": "SELECT count(*) FROM django_tasks_database_dbtaskresult "
            "WHERE status IN ('READY', 'RUNNING')",
        }[self.name]

    def worker_command(self, queue: str = "bench") -> list[str]:
        django = [sys.executable, "-m", "django"]
        if self.name == "astral-taskclaim":
            return [
                *django,
                "consume_claimed",
                queue,
                "--batch-size",
                "100",
                "--wait",
                "1",
                "--verbosity",
                "0",
            ]
        if self.name == "procrastinate":
            return [*django, "procrastinate", "worker", "--concurrency", "4", "--queues", "bench"]
        if self.name == "django-tasks-db":
            return [*django, "db_worker", "--interval", "0.01", "--no-startup-delay"]
        return [sys.executable, "-m", "benchmarks.peers", "pgqueuer", "--worker"]

    def worker_env(self, index: int) -> dict[str, str]:
        env = dict(os.environ)
        env["PGAPPNAME"] = f"{APP_NAME}-{index}"
        env["TASKCLAIM_BENCH_DATABASE_URL"] = self.url
        env["TASKCLAIM_BENCH_PEER"] = DJANGO_PEER.get(self.name, "")
        env["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
        env["PYTHONPATH"] = str(common.ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        return env


async def _pgqueuer_install(url: str) -> None:
    import psycopg
    from pgqueuer.adapters.drivers.psycopg import PsycopgDriver
    from pgqueuer.adapters.persistence.queries import Queries

    async with await psycopg.AsyncConnection.connect(common.conninfo(url), autocommit=True) as conn:
        await Queries(PsycopgDriver(conn)).install()


async def _pgqueuer_worker(url: str) -> None:
    import psycopg
    from pgqueuer.adapters.drivers.psycopg import PsycopgDriver
    from pgqueuer.adapters.persistence.queries import Queries
    from pgqueuer.core.qm import QueueManager

    conn = await psycopg.AsyncConnection.connect(common.conninfo(url), autocommit=True)
    manager = QueueManager(Queries(PsycopgDriver(conn)))

    @manager.entrypoint("bench_noop")
    async def noop(job: Any) -> None:
        """Nothing: the cost measured is the queue's."""

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, manager.shutdown.set)
    await manager.run(batch_size=10)


# -- the driver ----------------------------------------------------------------


def drive(
    system: System,
    *,
    tasks: int,
    dedup: bool,
    workers: int,
    rate: float | None,
    tag: str,
    producers: int = 1,
) -> dict[str, Any]:
    """Times ``tasks`` no-op tasks through ``system`` (see the module doc)."""
    system.open()
    system.clear()
    queue = "latency" if rate else "bench"
    stamps = Path(tempfile.mkdtemp(prefix="taskclaim-bench-"))
    env_extra = {STAMP_DIR: str(stamps)}
    procs = [
        subprocess.Popen(
            system.worker_command(queue),
            env={**system.worker_env(i), **env_extra},
            cwd=common.ROOT,
            stdout=subprocess.DEVNULL,
        )
        for i in range(workers)
    ]
    try:
        with common.connect(system.url) as watch:
            _await_workers(watch, workers, procs)
            for i in range(workers * 5):  # warm-up: every worker has run something
                system.enqueue(f"warm:{tag}:{i}", dedup=dedup, queue=queue)
            _await_drained(watch, system.pending_sql(), procs)
            committed: dict[str, float] = {}
            start = time.perf_counter()
            _produce(
                system,
                [f"e2e:{tag}:{i}" for i in range(tasks)],
                producers=producers,
                dedup=dedup,
                queue=queue,
                rate=rate,
                start=start,
                committed=committed,
            )
            enqueued = time.perf_counter() - start
            _await_drained(watch, system.pending_sql(), procs)
            seconds = time.perf_counter() - start
    finally:
        _stop(procs)
    result: dict[str, Any] = {"seconds": seconds, "enqueue_seconds": enqueued, "tasks": tasks}
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
    keys: list[str],
    *,
    producers: int,
    dedup: bool,
    queue: str,
    rate: float | None,
    start: float,
    committed: dict[str, float],
) -> None:
    """Enqueues ``keys`` from ``producers`` threads (key i from thread
    i mod producers), paced at ``rate`` per second overall when given,
    recording when each enqueue returned (committed)."""
    errors: list[BaseException] = []

    def produce(offset: int) -> None:
        from django.db import connection

        try:
            for i in range(offset, len(keys), producers):
                if rate:
                    pause = start + i / rate - time.perf_counter()
                    if pause > 0:
                        time.sleep(pause)
                system.enqueue(keys[i], dedup=dedup, queue=queue)
                committed[keys[i]] = time.time()
        except BaseException as error:  # re-raised below
            errors.append(error)
        finally:
            if system.name != "pgqueuer":
                connection.close()

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def _await_workers(watch: Any, workers: int, procs: list[subprocess.Popen[bytes]]) -> None:
    """Until every worker process has a connection open (60 s at most)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        _check_alive(procs)
        row = watch.execute(
            "SELECT count(DISTINCT application_name) FROM pg_stat_activity "
            "WHERE application_name LIKE %s",
            (f"{APP_NAME}-%",),
        ).fetchone()
        if row and row[0] >= workers:
            return
        time.sleep(0.05)
    raise TimeoutError("the workers did not connect within 60 s")


def _await_drained(watch: Any, pending_sql: str, procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        row = watch.execute(pending_sql).fetchone()
        if row and row[0] == 0:
            return
        _check_alive(procs)
        time.sleep(POLL)
    raise TimeoutError("the workers did not drain the queue within 600 s")


def _check_alive(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is not None:
            raise RuntimeError(f"worker {proc.args!r} exited with {proc.returncode}")


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers")
    parser.add_argument("system", choices=SYSTEMS)
    parser.add_argument("--setup", action="store_true", help="prepare the database and exit")
    parser.add_argument("--worker", action="store_true", help="run a pgqueuer worker")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dedup", choices=("on", "off"), default="off")
    parser.add_argument("--producers", type=int, default=1, help="enqueueing threads")
    parser.add_argument("--rate", type=float, default=None, help="enqueues per second")
    parser.add_argument("--tag", default="0", help="makes this run's keys unique")
    args = parser.parse_args(argv)
    url = os.environ.get("TASKCLAIM_BENCH_DATABASE_URL", "")
    if not url:
        parser.error("TASKCLAIM_BENCH_DATABASE_URL must name the system's database")
    system = System(args.system, url)
    if args.worker:
        asyncio.run(_pgqueuer_worker(url))
        return 0
    if args.setup:
        system.setup()
        return 0
    result = drive(
        system,
        tasks=args.tasks,
        dedup=args.dedup == "on",
        workers=args.workers,
        rate=args.rate,
        tag=args.tag,
        producers=args.producers,
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
