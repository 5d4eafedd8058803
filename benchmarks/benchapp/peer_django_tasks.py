"""django-tasks' no-op task (run by django-tasks-db's ``db_worker``)."""

from __future__ import annotations

from django_tasks import task


@task()
def noop(k: str) -> None:
    """Nothing: the cost measured is the queue's."""
