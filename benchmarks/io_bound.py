"""Row 12, I/O-bound tasks in one worker process: ``consume_claimed
--concurrency N`` on tasks that wait 20 ms (an HTTP call's stand-in).

- 12.1: 1,000 sync tasks, ``--concurrency 10``: the limit is
  10 / 0.020 s = 500/s; target ≥ 0.95x of it.
- 12.2: 1,000 ``async def`` tasks, ``--concurrency 100`` (limit 5,000/s).
- 12.3: ten task types on one queue (six waits, two database round trips,
  two bits of CPU), one command, ``--concurrency 10``.

The queue is filled beforehand by one ``INSERT ... SELECT`` of valid
envelopes (row 12.3's naming their task); the worker drains it with
``--burst``. The time runs from the first receive (the first message seen
leased) to the queue seen empty, polled every 20 ms, so the process's
start-up is not counted; the peak RSS is sampled at the same polls.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from . import common
from .common import Context, Figure
from .memory import resident_bytes
from .report import Row

LIMIT = 0.95
#: Poll period of the "how many are left?" check (and of the RSS samples).
POLL = 0.02
COUNTS = """SELECT count(*), count(*) FILTER (WHERE lease IS NULL)
            FROM taskclaim.message WHERE queue = %s"""

FILL = """
INSERT INTO taskclaim.message (queue, body)
SELECT %(queue)s, json_build_object(
  'key', 'io:' || i, 'claim', gen_random_uuid(), 'windowSeconds', 300,
  'task', json_build_object('k', 'io:' || i),
  'taskName', 'benchmarks.benchapp.tasks.mixed_' || (i %% 10))::text
FROM generate_series(1, %(n)s) AS i
"""

#: (row, queue, concurrency, what, the limit of tasks/s when each waits 20 ms)
CASES = (
    ("12.1", "io", 10, "20 ms sync tasks, concurrency 10", 500.0),
    ("12.2", "aio", 100, "20 ms async def tasks, concurrency 100", 5000.0),
    ("12.3", "mixed", 10, "10 task types on one queue, one command, concurrency 10", None),
)


def drain(ctx: Context, queue: str, concurrency: int, n: int) -> tuple[float, int]:
    """Seconds and peak RSS (bytes) of one worker draining ``n`` messages."""
    import psutil

    with ctx.connect() as raw:
        raw.execute("DELETE FROM taskclaim.message WHERE queue = %s", (queue,))
        raw.execute(FILL, {"queue": queue, "n": n})
        raw.execute("VACUUM ANALYZE taskclaim.message")
    env = dict(
        os.environ,
        TASKCLAIM_BENCH_DATABASE_URL=ctx.database_url,
        DJANGO_SETTINGS_MODULE="benchmarks.settings",
    )
    command = [sys.executable, "-m", "django", "consume_claimed", queue, "--burst"]
    command += ["--wait", "0", "--verbosity", "0", "--concurrency", str(concurrency)]
    peak = 0
    start: float | None = None
    end = 0.0
    proc = subprocess.Popen(command, env=env, cwd=common.ROOT, stdout=subprocess.DEVNULL)
    worker = psutil.Process(proc.pid)
    try:
        with ctx.connect() as watch:
            while proc.poll() is None:
                row = watch.execute(COUNTS, (queue,)).fetchone()
                now = time.perf_counter()
                total, unleased = (int(row[0]), int(row[1])) if row else (0, 0)
                if start is None and unleased < n:
                    start = now  # the first receive
                if total:
                    end = now
                rss = resident_bytes(worker)
                if rss is not None:
                    peak = max(peak, rss)
                time.sleep(POLL)
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    if start is None:
        raise RuntimeError(f"consume_claimed {queue} received nothing")
    seconds = end + POLL - start
    if proc.returncode != 0:
        raise RuntimeError(f"consume_claimed {queue} exited with {proc.returncode}")
    with ctx.connect() as raw:
        left = raw.execute(
            "SELECT count(*) FROM taskclaim.message WHERE queue = %s", (queue,)
        ).fetchone()
    if left and left[0]:
        raise RuntimeError(f"consume_claimed {queue} left {left[0]} messages")
    return seconds, peak


def run(ctx: Context, *, tasks: int = 1000) -> list[Row]:
    from django.db import connections

    connections.close_all()
    n = ctx.size(tasks, minimum=100)
    rows = []
    for number, queue, concurrency, title, limit in CASES:
        rate, rss = Figure("tasks/s"), Figure("MiB")
        for _ in range(ctx.runs):
            seconds, peak = drain(ctx, queue, concurrency, n)
            rate.add(n / seconds)
            rss.add(peak / 2**20)
        share = None if limit is None else rate.median / limit
        measured = f"{rate.median:,.0f}/s, peak RSS {rss.median:.0f} MiB"
        if share is not None:
            measured += f" ({share:.2f}x the {limit:,.0f}/s limit)"
        rows.append(
            Row(
                number,
                title,
                measured,
                "≥ 0.95x limit" if number == "12.1" else "recorded",
                share is None or number != "12.1" or share >= LIMIT,
                {"consume_claimed": rate, "peak RSS": rss},
                value=rate.median,
                details={"tasks": n, "concurrency": concurrency, "rss_mib": rss.median},
            )
        )
    return rows
