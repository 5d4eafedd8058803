"""The systems of row 4, each behind the same small interface, set up the
way its maintainers recommend.

- **astral-taskclaim**: ``enqueue_claimed`` / ``enqueue_claimed_many`` on
  the PostgreSQL queue, workers ``manage.py consume_claimed``.
- **pgqueuer** on asyncpg, its tuning guide's driver: producers on an
  ``AsyncpgPoolDriver`` pool, each worker a ``QueueManager`` on a direct
  asyncpg connection; installed with ``durability=balanced`` (the queue
  table stays logged, so jobs are as durable as our messages; only its log
  and statistics tables are unlogged) and ``pgq autovac``'s settings.
- **pgqueuer-psycopg**: the same, on psycopg 3 (sync producers, async
  workers), for comparison with the asyncpg figures.
- **procrastinate** through its Django integration, an ``async def``
  no-op task, workers ``manage.py procrastinate worker --concurrency 4``.
- **django-tasks-db**: ``@task`` + ``.enqueue()``, workers ``db_worker``
  polling every 10 ms.
- **astral-taskclaim-tasks**: the same ``@task`` code on this app's
  ``ClaimTaskBackend`` (results stored, as django-tasks-db stores them),
  workers ``manage.py consume_claimed djtasks``.
- **tasks-floor**: row 10.1's floor, no system: the statement
  ``ClaimTaskBackend.enqueue`` sends (claim, message and result row in
  one), with the parameters it sends, by raw psycopg 3, prepared, on one
  autocommit connection per producer thread; only its token changes from
  call to call.

Every system runs in its own database on the same server.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import uuid
from typing import Any

from . import common

SYSTEMS = (
    "astral-taskclaim",
    "pgqueuer",
    "pgqueuer-psycopg",
    "procrastinate",
    "django-tasks-db",
    "astral-taskclaim-tasks",
    "tasks-floor",
)
#: Row 10.1's floor (see the module doc).
FLOOR = "tasks-floor"
PGQUEUER = {"pgqueuer", "pgqueuer-psycopg"}
#: Systems with a dedup feature (pgqueuer ``dedupe_key``, procrastinate
#: ``queueing_lock``); astral-taskclaim always claims.
DEDUP = {"astral-taskclaim", "pgqueuer", "pgqueuer-psycopg", "procrastinate"}
#: Systems with a batch enqueue, and whether it can dedup each task:
#: procrastinate's ``batch_defer`` takes one ``queueing_lock`` for the whole
#: call, so it cannot dedup distinct keys; django-tasks has no batch enqueue.
BATCH_DEDUP = {"astral-taskclaim": True, "pgqueuer": True, "procrastinate": False}
DATABASES = {
    "astral-taskclaim": common.DB_PREFIX,
    "pgqueuer": f"{common.DB_PREFIX}_pgqueuer",
    "pgqueuer-psycopg": f"{common.DB_PREFIX}_pgqueuer_psycopg",
    "procrastinate": f"{common.DB_PREFIX}_procrastinate",
    "django-tasks-db": f"{common.DB_PREFIX}_django_tasks",
    "astral-taskclaim-tasks": f"{common.DB_PREFIX}_taskclaim_tasks",
    FLOOR: f"{common.DB_PREFIX}_tasks_floor",
}
DJANGO_PEER = {
    "astral-taskclaim": "",
    "procrastinate": "procrastinate",
    "django-tasks-db": "django_tasks",
    "astral-taskclaim-tasks": "taskclaim_tasks",
    FLOOR: "taskclaim_tasks",
}
APP_NAME = "taskclaim-bench-worker"
#: Messages a worker takes per fetch, the same for every system that
#: fetches in batches (astral-taskclaim, pgqueuer; both default to 10, and
#: pgqueuer's tuning guide says to raise it for short jobs, as these are);
#: procrastinate and django-tasks-db fetch one job at a time.
WORKER_BATCH = 100
#: pgqueuer's durability level (see the module doc).
PGQUEUER_DURABILITY = "balanced"


def database_url(server_url: str, system: str) -> str:
    return common.with_database(server_url, DATABASES[system])


class System:
    """One system: set-up, enqueue (one or many), the pending count and the
    worker command."""

    def __init__(self, name: str, url: str) -> None:
        self.name = name
        self.url = url
        self._local = threading.local()
        if name in PGQUEUER:
            os.environ["PGQUEUER_DURABILITY"] = PGQUEUER_DURABILITY

    @property
    def asyncpg(self) -> bool:
        """Whether this system's producers run on asyncpg (asyncio tasks)."""
        return self.name == "pgqueuer"

    def setup(self) -> None:
        if self.name in PGQUEUER:
            asyncio.run(_pgqueuer_install(self.url))
        else:
            common.setup_django(self.url, peer=DJANGO_PEER[self.name])

    def open(self) -> None:
        """Prepares this process to enqueue (Django or a plain connection)."""
        if self.name in PGQUEUER:
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
            if self.name == FLOOR:
                self._floor = _floor_statement()

    def clear(self) -> None:
        tables = {
            "astral-taskclaim": "taskclaim.message, taskclaim.claim, taskclaim.run",
            "pgqueuer": "pgqueuer, pgqueuer_log",
            "pgqueuer-psycopg": "pgqueuer, pgqueuer_log",
            "procrastinate": "procrastinate_jobs CASCADE",
            "django-tasks-db": "django_tasks_database_dbtaskresult",
            "astral-taskclaim-tasks": "taskclaim.message, taskclaim.claim, taskclaim.task_result",
            FLOOR: "taskclaim.message, taskclaim.claim, taskclaim.task_result",
        }[self.name]
        with common.connect(self.url) as conn:
            conn.execute(f"TRUNCATE {tables}")

    def enqueue(self, keys: list[str], *, dedup: bool, queue: str = "bench") -> None:
        """Enqueues one no-op task per key: one call for one key, one batch
        call for several (on the systems that have one)."""
        if len(keys) > 1:
            self._enqueue_many(keys, dedup=dedup, queue=queue)
            return
        key = keys[0]
        if self.name == "astral-taskclaim":
            from astral_taskclaim.claims.claim import enqueue_claimed
            from astral_taskclaim.queues import queues

            enqueue_claimed(queues[queue], key, {"k": key}, window_seconds=300)
        elif self.name in PGQUEUER:
            self._pgq().enqueue("bench_noop", key.encode(), dedupe_key=key if dedup else None)
        elif self.name == "procrastinate":
            from benchmarks.benchapp.peer_procrastinate import noop

            if dedup:
                noop.configure(queueing_lock=key).defer(k=key)
            else:
                noop.defer(k=key)
        elif self.name == FLOOR:
            statement, template = self._floor
            token = str(uuid.uuid4())
            params = {
                name: value.replace(template["token"], token) if isinstance(value, str) else value
                for name, value in template.items()
            }
            local = self._local
            if not hasattr(local, "conn"):
                local.conn = common.connect(self.url)
            local.conn.execute(statement, params, prepare=True)
        else:  # the Django Tasks backends
            from benchmarks.benchapp.peer_tasks import noop as task

            task.enqueue(k=key)

    def _enqueue_many(self, keys: list[str], *, dedup: bool, queue: str) -> None:
        if self.name == "astral-taskclaim":
            from astral_taskclaim.claims.bulk import enqueue_claimed_many
            from astral_taskclaim.queues import queues

            enqueue_claimed_many(queues[queue], [(k, {"k": k}) for k in keys], window_seconds=300)
        elif self.name in PGQUEUER:
            self._pgq().enqueue(**pgqueuer_batch(keys, dedup=dedup))
        elif self.name == "procrastinate" and not dedup:
            from benchmarks.benchapp.peer_procrastinate import noop

            noop.batch_defer(*({"k": key} for key in keys))
        else:  # no batch call (with dedup): one call per task, one commit
            from django.db import transaction

            with transaction.atomic():
                for key in keys:
                    self.enqueue([key], dedup=dedup, queue=queue)

    def pending_sql(self) -> str:
        return {
            "astral-taskclaim": "SELECT count(*) FROM taskclaim.message",
            "pgqueuer": "SELECT count(*) FROM pgqueuer",
            "pgqueuer-psycopg": "SELECT count(*) FROM pgqueuer",
            "procrastinate": "SELECT count(*) FROM procrastinate_jobs "
            "WHERE status IN ('todo', 'doing')",
            "django-tasks-db": "SELECT count(*) FROM django_tasks_database_dbtaskresult "
            "WHERE status IN ('READY', 'RUNNING')",
            "astral-taskclaim-tasks": "SELECT count(*) FROM taskclaim.message",
            FLOOR: "SELECT count(*) FROM taskclaim.message",
        }[self.name]

    def worker_command(
        self, queue: str = "bench", *, managers: int = 1, batch: int = WORKER_BATCH
    ) -> list[str]:
        django = [sys.executable, "-m", "django"]
        if self.name.startswith("astral-taskclaim"):
            alias = "djtasks" if self.name == "astral-taskclaim-tasks" else queue
            size = ("--batch-size", str(batch))
            return [*django, "consume_claimed", alias, *size, "--wait", "1", "--verbosity", "0"]
        if self.name == "procrastinate":
            return [*django, "procrastinate", "worker", "--concurrency", "4", "--queues", "bench"]
        if self.name == "django-tasks-db":
            return [*django, "db_worker", "--interval", "0.01", "--no-startup-delay"]
        return [
            *(sys.executable, "-m", "benchmarks.peers", self.name, "--worker"),
            *("--managers", str(managers), "--worker-batch", str(batch)),
        ]

    def worker_env(self, index: int) -> dict[str, str]:
        env = dict(os.environ)
        env["PGAPPNAME"] = f"{APP_NAME}-{index}"
        env["TASKCLAIM_BENCH_DATABASE_URL"] = self.url
        env["TASKCLAIM_BENCH_PEER"] = DJANGO_PEER.get(self.name, "")
        env["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
        env["PYTHONPATH"] = str(common.ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        return env


def _floor_statement() -> tuple[str, dict[str, Any]]:
    """The Django Task enqueue's statement and one no-op run's parameters,
    as ``ClaimTaskBackend.enqueue`` makes them (Django is set up)."""
    from astral_taskclaim.db import sqlfiles
    from astral_taskclaim.queues import queues
    from astral_taskclaim.tasks_backend.compat import task_backends
    from benchmarks.benchapp.peer_tasks import noop

    request = task_backends["default"]._run_request(noop, [], {"k": "floor"})
    params = request.in_database_params(queues[request.queue])
    return sqlfiles.read("tasks/enqueue.sql"), params


def pgqueuer_batch(keys: list[str], *, dedup: bool) -> dict[str, Any]:
    """Arguments of pgqueuer's list ``enqueue`` for ``keys`` (a repeated
    dedupe key skipped, as our repeated key gets ``None``)."""
    args: dict[str, Any] = {
        "entrypoint": ["bench_noop"] * len(keys),
        "payload": [key.encode() for key in keys],
        "priority": [0] * len(keys),
    }
    if dedup:
        args |= {"dedupe_key": list(keys), "on_conflict": "skip"}
    return args


async def _pgqueuer_install(url: str) -> None:
    import psycopg
    from pgqueuer.adapters.drivers.psycopg import PsycopgDriver
    from pgqueuer.adapters.persistence.queries import Queries

    async with await psycopg.AsyncConnection.connect(common.conninfo(url), autocommit=True) as conn:
        queries = Queries(PsycopgDriver(conn))
        await queries.install()
        await queries.optimize_autovacuum()  # `pgq autovac`, the guide's checklist


async def pgqueuer_worker(system: str, url: str, *, managers: int, batch: int) -> None:
    """``managers`` QueueManagers in this process, each on its own
    connection (asyncpg or psycopg by ``system``), running a no-op
    ``async def`` entrypoint in batches of ``batch``."""
    import signal

    from pgqueuer.adapters.persistence.queries import Queries
    from pgqueuer.core.qm import QueueManager

    async def queries() -> Any:
        if system == "pgqueuer":
            import asyncpg

            # asyncpg does not read PGAPPNAME, which the driver waits on.
            named = {"application_name": os.environ.get("PGAPPNAME", "")}
            conn = await asyncpg.connect(_asyncpg_dsn(url), server_settings=named)
            return Queries.from_asyncpg_connection(conn)
        import psycopg

        conn = await psycopg.AsyncConnection.connect(common.conninfo(url), autocommit=True)
        return Queries.from_psycopg_connection(conn)

    qms = [QueueManager(await queries()) for _ in range(managers)]
    for manager in qms:

        @manager.entrypoint("bench_noop")
        async def noop(job: Any) -> None:
            """Nothing: the cost measured is the queue's."""

    def stop() -> None:
        for manager in qms:
            manager.shutdown.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    await asyncio.gather(*(manager.run(batch_size=batch) for manager in qms))


def _asyncpg_dsn(url: str) -> str:
    """asyncpg takes ``postgresql://`` URLs (a socket directory as ``?host=``)."""
    return url.replace("postgres://", "postgresql://", 1)


async def pgqueuer_produce(
    url: str, chunks: list[list[str]], *, producers: int, dedup: bool
) -> None:
    """Enqueues ``chunks`` (one call each) from ``producers`` asyncio tasks
    sharing an asyncpg pool, the guide's producer set-up."""
    import asyncpg
    from pgqueuer.adapters.persistence.queries import Queries

    pool = await asyncpg.create_pool(_asyncpg_dsn(url), min_size=producers, max_size=producers)
    try:
        queries = Queries.from_asyncpg_pool(pool)

        async def produce(offset: int) -> None:
            for keys in chunks[offset::producers]:
                if len(keys) == 1:
                    dedupe = keys[0] if dedup else None
                    await queries.enqueue("bench_noop", keys[0].encode(), dedupe_key=dedupe)
                else:
                    await queries.enqueue(**pgqueuer_batch(keys, dedup=dedup))

        await asyncio.gather(*(produce(n) for n in range(producers)))
    finally:
        await pool.close()
