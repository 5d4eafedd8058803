"""procrastinate's no-op task (its Django integration imports this module).

An ``async def`` task, as procrastinate recommends: its worker runs
coroutines on its event loop, where a sync task would go to a thread.
Row 12's tasks run the same work as ours, sync and async.
"""

from __future__ import annotations

from typing import Any

from procrastinate.contrib.django import app

from . import work

__all__ = ["MIXED", "aio_sleep", "db_write", "io_sleep", "noop"]


@app.task(name="bench_noop", queue="bench")
async def noop(k: str) -> None:
    """Nothing: the cost measured is the queue's."""


# Row 12: the same work as ours (benchmarks.benchapp.work), sync and async.
@app.task(name="bench_io_sleep", queue="io")
def io_sleep(k: str) -> None:
    """20 ms of blocking wait (procrastinate runs it in a thread)."""
    work.io_wait(k)


@app.task(name="bench_aio_sleep", queue="aio")
async def aio_sleep(k: str) -> None:
    """20 ms of waiting on the worker's event loop."""
    await work.aio_wait(k)


@app.task(name="bench_db_write", queue="db")
def db_write(k: str) -> None:
    """One ORM write, a row inserted (row 12.4): sync, as 12.3's writes
    and Django's ORM are (its ``acreate`` runs the same call on a thread)."""
    work.db_write(k)


def _mixed(number: int) -> Any:
    def run(k: str) -> None:
        work.mixed(number, k)

    run.__qualname__ = run.__name__ = f"mixed_{number}"
    return app.task(name=f"bench_mixed_{number}", queue="mixed")(run)


#: Row 12.3's ten task types, plain functions as a Django project writes them.
MIXED = [_mixed(number) for number in range(10)]
