"""Celery's side of row 12, set up as its "First steps with Django" guide
does: one ``Celery`` app reading ``CELERY_*`` settings from Django's, a
Redis broker (``CELERY_BROKER_URL``, the server the harness started), no
result backend (Celery's default), every other setting at its default
(prefetch multiplier 4, early acks).

The worker is ``celery -A benchmarks.benchapp.peer_celery worker --pool
threads --concurrency N``: the threads pool runs N tasks side by side in
one process, the way to compare with one ``consume_claimed`` process
(prefork would be N processes; gevent and eventlet need their own package
and monkey-patching). The tasks run the same work as ours.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from . import work

app = Celery("benchmarks")
app.config_from_object("django.conf:settings", namespace="CELERY")


@app.task(name="bench_io_sleep", queue="io")
def io_sleep(k: str) -> None:
    """20 ms of blocking wait, on one of the pool's threads."""
    work.io_wait(k)


def _mixed(number: int) -> Any:
    def run(k: str) -> None:
        work.mixed(number, k)

    run.__qualname__ = run.__name__ = f"mixed_{number}"
    return app.task(name=f"bench_mixed_{number}", queue="mixed")(run)


#: Row 12.3's ten task types.
MIXED = [_mixed(number) for number in range(10)]
