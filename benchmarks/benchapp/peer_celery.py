"""Celery's side of row 12, set up as its "First steps with Django" guide
does: one ``Celery`` app reading ``CELERY_*`` settings from Django's, a
Redis broker (``CELERY_BROKER_URL``, the server the harness started), no
result backend (Celery's default), every other setting at its default
(prefetch multiplier 4, early acks).

The worker is ``celery -A benchmarks.benchapp.peer_celery worker --pool
threads --concurrency N``: the threads pool runs N tasks side by side in
one process, the way to compare with one ``consume_claimed`` process
(prefork would be N processes; gevent and eventlet need their own package
and monkey-patching). Row 12.4 starts two such workers, each with its own
``--hostname``, as Celery's docs ask of workers on one machine, at the
default concurrency (the number of cores). The tasks run the same work as
ours.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from . import work

__all__ = ["MIXED", "app", "db_write", "io_sleep"]

app = Celery("benchmarks")
app.config_from_object("django.conf:settings", namespace="CELERY")


@app.task(name="bench_io_sleep", queue="io")
def io_sleep(k: str) -> None:
    """20 ms of blocking wait, on one of the pool's threads."""
    work.io_wait(k)


@app.task(name="bench_db_write", queue="db")
def db_write(k: str) -> None:
    """One ORM write, a row inserted (row 12.4)."""
    work.db_write(k)


def _mixed(number: int) -> Any:
    def run(k: str) -> None:
        work.mixed(number, k)

    run.__qualname__ = run.__name__ = f"mixed_{number}"
    return app.task(name=f"bench_mixed_{number}", queue="mixed")(run)


#: Row 12.3's ten task types.
MIXED = [_mixed(number) for number in range(10)]
