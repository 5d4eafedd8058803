"""Row 7, memory: the resident set of one ``manage.py consume_claimed``
worker over 500,000 messages.

The queue is filled by one ``INSERT ... SELECT generate_series`` with valid
envelopes; the worker drains it in batches of 100 (``--burst``). Its RSS is
sampled every 0.2 s while it runs (:func:`resident_bytes`: a process that
has exited, even one not yet reaped, is never sampled); the baseline is the
first sample after a tenth of the messages are done (imports, caches and
connections are warm by then). Target: the largest later sample is at most
10% above the baseline.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from . import common
from .common import Context, Figure
from .report import Row

if TYPE_CHECKING:
    import psutil

GROWTH = 0.10
SAMPLE = 0.2

FILL = """
INSERT INTO taskclaim.message (queue, body)
SELECT 'bench', json_build_object(
  'key', 'mem:' || i, 'claim', gen_random_uuid(), 'windowSeconds', 300,
  'task', json_build_object('k', 'mem:' || i))::text
FROM generate_series(1, %s) AS i
"""


def resident_bytes(process: psutil.Process) -> int | None:
    """``process``'s resident set size, or ``None`` once it is exiting or
    has exited.

    psutil reads the RSS of a process that has exited but not been reaped
    (a zombie), or is releasing its memory on the way out, as 0: such a
    reading says nothing about the worker's memory. The status is read
    after the RSS, so a process alive then was alive when it was sampled.
    """
    import psutil

    try:
        rss = process.memory_info().rss
        finished = process.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return None
    return None if finished or rss <= 0 else rss


def warm_samples(samples: list[tuple[int, int]], messages: int) -> list[int]:
    """The RSS samples (``(messages left, rss)``) taken once a tenth of
    ``messages`` were done; the last one if the worker drained the queue
    before that. ``RuntimeError`` when there is no sample at all."""
    warm = [rss for left, rss in samples if left <= messages * 0.9]
    if not warm:  # drained before the first warm sample: too small to tell
        warm = [rss for _, rss in samples[-1:]]
    if not warm:
        raise RuntimeError("consume_claimed finished before its memory could be sampled")
    return warm


def run(ctx: Context, *, messages: int = 500_000) -> list[Row]:
    import psutil
    from django.db import connections

    connections.close_all()
    n = ctx.size(messages, minimum=200)
    with ctx.connect() as raw:
        raw.execute("DELETE FROM taskclaim.message WHERE queue = 'bench'")
        raw.execute(FILL, (n,))
        raw.execute("VACUUM ANALYZE taskclaim.message")
    env = dict(
        os.environ,
        TASKCLAIM_BENCH_DATABASE_URL=ctx.database_url,
        DJANGO_SETTINGS_MODULE="benchmarks.settings",
    )
    command = [
        sys.executable,
        "-m",
        "django",
        "consume_claimed",
        "bench",
        "--batch-size",
        "100",
        "--burst",
        "--wait",
        "0",
        "--verbosity",
        "0",
    ]
    samples: list[tuple[int, int]] = []  # (messages left, rss bytes)
    start = time.perf_counter()
    with ctx.connect() as watch:
        proc = subprocess.Popen(command, env=env, cwd=common.ROOT, stdout=subprocess.DEVNULL)
        worker = psutil.Process(proc.pid)
        try:
            while proc.poll() is None:
                left = watch.execute(
                    "SELECT count(*) FROM taskclaim.message WHERE queue = 'bench'"
                ).fetchone()
                rss = resident_bytes(worker)
                if rss is None:  # exiting: the run is over
                    break
                samples.append((int(left[0]) if left else 0, rss))
                time.sleep(SAMPLE)
        finally:
            if proc.poll() is None:
                proc.terminate()
            proc.wait(timeout=30)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"consume_claimed exited with {proc.returncode}")
    warm = warm_samples(samples, n)
    base, peak = warm[0], max(warm)
    growth = peak / base - 1
    figure = Figure("MiB")
    figure.samples = [rss / 2**20 for rss in warm]
    return [
        Row(
            "7",
            f"worker RSS over {n:,} messages",
            f"+{growth:.1%} ({base / 2**20:.0f} → {peak / 2**20:.0f} MiB, "
            f"{n / seconds:,.0f} msg/s)",
            f"≤ +{GROWTH:.0%}",
            growth <= GROWTH,
            {"consume_claimed RSS": figure},
            value=growth,
            details={"messages": n, "seconds": seconds, "samples": len(samples)},
        )
    ]
