"""The no-op Django Task: the same ``@task()`` code for this app's
``ClaimTaskBackend`` and for django-tasks-db's ``DatabaseBackend``.

Each backend is written for one copy of the framework (ours for Django's own
``django.tasks``, django-tasks-db for the ``django-tasks`` package), so the
decorator comes from the copy the process's backend uses.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from . import work

__all__ = ["MIXED", "db_write", "io_sleep", "noop"]

if settings.PEER == "django_tasks":
    from django_tasks import task
else:  # astral-taskclaim's backend: Django's own framework where it has one
    try:
        from django.tasks import task
    except ImportError:  # Django 5.2
        from django_tasks import task


@task()
def noop(k: str) -> None:
    """Nothing: the cost measured is the backend's (results are stored)."""


# Row 12: the same work as ours (benchmarks.benchapp.work).
@task()
def io_sleep(k: str) -> None:
    """20 ms of blocking wait."""
    work.io_wait(k)


@task()
def db_write(k: str) -> None:
    """One ORM write, a row inserted (row 12.4)."""
    work.db_write(k)


def _mixed(number: int) -> Any:
    def run(k: str) -> None:
        work.mixed(number, k)

    # A Django Task is found again by its function's dotted path: a module
    # attribute of that name.
    run.__qualname__ = run.__name__ = f"mixed_{number}"
    globals()[run.__name__] = task()(run)
    return globals()[run.__name__]


#: Row 12.3's ten task types.
MIXED = [_mixed(number) for number in range(10)]
