"""astral-taskclaim's claimed tasks of the benchmarks (autodiscovered).

``noop`` does nothing: row 4 measures the machinery, not the work.
``io_sleep`` and ``aio_sleep`` wait 20 ms (an HTTP call's stand-in, sync
and ``async def``), the ten ``mixed_*`` tasks share one queue and
``db_write`` makes one ORM write: row 12, whose work
(:mod:`benchmarks.benchapp.work`) every system runs alike.
``stamp`` writes ``key<TAB>time.time()`` when it starts, for row 5's
enqueue-to-start latency (the file is per process, so no lock is needed).
"""

from __future__ import annotations

import os
import time
from typing import Any, TextIO

from astral_taskclaim.tasks import claimed_task

from . import work

__all__ = [
    "NOOP_QUEUE",
    "STAMP_DIR",
    "STAMP_QUEUE",
    "aio_sleep",
    "db_write",
    "io_sleep",
    "noop",
    "stamp",
]

NOOP_QUEUE = "bench"
STAMP_QUEUE = "latency"
STAMP_DIR = "TASKCLAIM_BENCH_STAMPS"

_stamps: TextIO | None = None


@claimed_task(queue=NOOP_QUEUE, max_retries=3, window_seconds=300)
def noop(task: Any) -> None:
    """Nothing: the cost measured is the queue's and the claim's."""


@claimed_task(queue=STAMP_QUEUE, max_retries=3, window_seconds=300)
def stamp(task: Any) -> None:
    """Records when this task started, by wall clock (shared by processes)."""
    global _stamps
    now = time.time()
    if _stamps is None:
        directory = os.environ[STAMP_DIR]
        _stamps = open(  # noqa: SIM115  (kept open for the process's life)
            os.path.join(directory, f"ours-{os.getpid()}.tsv"), "a", buffering=1
        )
    _stamps.write(f"{task['k']}\t{now!r}\n")


@claimed_task(queue="io", max_retries=3, window_seconds=300)
def io_sleep(task: Any) -> None:
    """20 ms of waiting, as on a remote service."""
    work.io_wait(task["k"])


@claimed_task(queue="aio", max_retries=3, window_seconds=300)
async def aio_sleep(task: Any) -> None:
    """20 ms of waiting, the ``async def`` way."""
    await work.aio_wait(task["k"])


@claimed_task(queue="db", max_retries=3, window_seconds=300)
def db_write(task: Any) -> None:
    """One ORM write, a row inserted (row 12.4)."""
    work.db_write(task["k"])


def _mixed(number: int) -> None:
    def run(task: Any) -> None:
        work.mixed(number, task["k"])

    run.__qualname__ = run.__name__ = f"mixed_{number}"
    claimed_task(queue="mixed", max_retries=3, window_seconds=300, default=number == 0)(run)


for _number in range(10):
    _mixed(_number)
