"""What every benchmark shares: the server, fresh databases, timing.

A figure is the median of several runs with its min and max; the variants of
a row run interleaved (A B, B A, A B, ...) so drift of the machine (caches,
autovacuum, a noisy neighbour) hits both sides alike.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent


def run_module(
    module: str, args: Sequence[str], url: str, env: dict[str, str] | None = None
) -> str:
    """The standard output of ``python -m module *args`` run from the
    checkout against the benchmark database ``url`` (with ``env`` added to
    the environment); ``RuntimeError`` with the tail of its stderr if it
    fails. The peers' sides run this way, each in a process of its own."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        env=dict(os.environ, TASKCLAIM_BENCH_DATABASE_URL=url, **(env or {})),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{module} {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


RESULTS = Path(__file__).resolve().parent / "results"
DATA_DIR = ROOT / ".pgdata-bench"
#: Every database the benchmarks create starts with this, so a shared server
#: (``DATABASE_URL``) never sees them touch anything else.
DB_PREFIX = "taskclaim_bench"
SEED = 20240607


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` (host, socket and user kept)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def conninfo(url: str) -> str:
    """A libpq conninfo for psycopg from a ``postgres://`` URL."""
    return psycopg.conninfo.make_conninfo(url.replace("postgres://", "postgresql://", 1))


def connect(url: str, *, autocommit: bool = True) -> psycopg.Connection[Any]:
    """A plain psycopg 3 connection to ``url``."""
    return psycopg.connect(conninfo(url), autocommit=autocommit)


def recreate_database(server_url: str, name: str) -> str:
    """Drops and creates database ``name``; its URL."""
    if not name.startswith(DB_PREFIX):
        raise ValueError(f"benchmark databases must start with {DB_PREFIX!r}, got {name!r}")
    with connect(with_database(server_url, "postgres")) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return with_database(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    """Drops database ``name`` if it exists."""
    if not name.startswith(DB_PREFIX):
        raise ValueError(f"benchmark databases must start with {DB_PREFIX!r}, got {name!r}")
    with connect(with_database(server_url, "postgres")) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@dataclass
class Figure:
    """Samples of one measured quantity: a median with min and max."""

    unit: str
    samples: list[float] = field(default_factory=list)

    def add(self, value: float) -> None:
        self.samples.append(value)

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else float("nan")

    @property
    def min(self) -> float:
        return min(self.samples) if self.samples else float("nan")

    @property
    def max(self) -> float:
        return max(self.samples) if self.samples else float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "samples": self.samples,
        }


def interleave(runs: int, variants: Sequence[str]) -> Iterator[tuple[int, str]]:
    """``(run, variant)`` pairs, each run's order reversed from the last."""
    for run in range(runs):
        order = list(variants) if run % 2 == 0 else list(reversed(variants))
        for variant in order:
            yield run, variant


def rate(count: int, seconds: float) -> float:
    """``count / seconds``, guarding a zero-length run."""
    return count / seconds if seconds > 0 else float("inf")


@contextmanager
def stopwatch() -> Iterator[Callable[[], float]]:
    """``with stopwatch() as elapsed:`` — ``elapsed()`` in seconds."""
    start = time.perf_counter()
    end: list[float] = []
    yield lambda: (end[0] if end else time.perf_counter()) - start
    end.append(time.perf_counter())


def percentile(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile (nearest rank) of ``values``."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[index]


@dataclass
class Context:
    """What a benchmark needs: the server and our database, sizes, seeds."""

    server_url: str
    database_url: str
    runs: int = 3
    seed: int = SEED
    #: Multiplies every row count (``--scale``); the smoke test uses tiny sizes.
    scale: float = 1.0
    #: Facts measured by one row that another row uses (row 5 runs at half
    #: the load row 4 measured).
    shared: dict[str, Any] = field(default_factory=dict)

    def size(self, n: int, *, minimum: int = 1) -> int:
        return max(minimum, int(n * self.scale))

    def connect(self, *, autocommit: bool = True) -> psycopg.Connection[Any]:
        return connect(self.database_url, autocommit=autocommit)


def machine_info(database_url: str) -> dict[str, Any]:
    """Cores, memory, Python, Django and PostgreSQL facts of this run."""
    info: dict[str, Any] = {
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": sys.version.split()[0],
    }
    try:
        import psutil

        info["memory_gib"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    for package in ("django", "psycopg", "pgqueuer", "procrastinate", "django-tasks-db"):
        try:
            info[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            info[package] = None
    with connect(database_url) as conn:
        for setting in (
            "server_version",
            "synchronous_commit",
            "fsync",
            "shared_buffers",
            "max_connections",
            "shared_preload_libraries",
        ):
            row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(setting))).fetchone()
            info[f"pg_{setting}"] = row[0] if row else None
    return info


def setup_django(database_url: str, *, peer: str = "") -> None:
    """Configures Django with :mod:`benchmarks.settings` on ``database_url``
    (exported, so worker subprocesses inherit it) and migrates."""
    import django
    from django.core.management import call_command

    os.environ["TASKCLAIM_BENCH_DATABASE_URL"] = database_url
    os.environ["TASKCLAIM_BENCH_PEER"] = peer
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def alternating_rates(
    variants: dict[str, Callable[[int], int]], *, chunks: int, run: int = 0
) -> dict[str, float]:
    """Items per second of each variant, run in alternating chunks.

    ``variants[name](chunk)`` does one chunk of work and returns how many
    items it did. Chunks of the variants alternate (the order flipping each
    chunk), so a burst of load from elsewhere on the machine lands on all of
    them alike instead of on whichever ran at that moment.
    """
    done = dict.fromkeys(variants, 0)
    spent = dict.fromkeys(variants, 0.0)
    names = list(variants)
    for chunk in range(chunks):
        order = names if (chunk + run) % 2 == 0 else list(reversed(names))
        for name in order:
            start = time.perf_counter()
            done[name] += variants[name](chunk)
            spent[name] += time.perf_counter() - start
    return {name: rate(done[name], spent[name]) for name in names}


def url_from_settings(settings_dict: dict[str, Any]) -> str:
    """A ``postgres://`` URL of a Django ``DATABASES`` entry (a socket
    directory as ``?host=``), for the benchmarks' raw connections."""
    from urllib.parse import quote, urlencode

    user = quote(str(settings_dict.get("USER") or ""), safe="")
    password = settings_dict.get("PASSWORD")
    auth = f"{user}:{quote(str(password), safe='')}@" if password else (f"{user}@" if user else "")
    options = settings_dict.get("OPTIONS") or {}
    host = str(settings_dict.get("HOST") or options.get("host") or "")
    port = str(settings_dict.get("PORT") or options.get("port") or "")
    name = quote(str(settings_dict["NAME"]), safe="")
    if host.startswith("/"):
        query = {"host": host} | ({"port": port} if port else {})
        return f"postgres://{auth}/{name}?{urlencode(query)}"
    netloc = host + (f":{port}" if port else "")
    return f"postgres://{auth}{netloc}/{name}"
