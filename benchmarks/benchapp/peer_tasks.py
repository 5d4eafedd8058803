"""The no-op Django Task: the same ``@task()`` code for this app's
``ClaimTaskBackend`` and for django-tasks-db's ``DatabaseBackend``.

Each backend is written for one copy of the framework (ours for Django's own
``django.tasks``, django-tasks-db for the ``django-tasks`` package), so the
decorator comes from the copy the process's backend uses.
"""

from __future__ import annotations

from django.conf import settings

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
