"""A backend for Django's Tasks framework on the app's queues.

``TASKS = {"default": {"BACKEND": "astral_taskclaim.tasks_backend.ClaimTaskBackend"}}``
(see :mod:`.backend`). Needs Django 6, or Django 5.2 with the
``django-tasks`` package; the names are imported on first use, so the rest
of the app works without either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils.module_loading import import_string

if TYPE_CHECKING:
    from astral_taskclaim.tasks_backend.backend import ClaimTaskBackend
    from astral_taskclaim.tasks_backend.task import ClaimTask

__all__ = ["ClaimTask", "ClaimTaskBackend"]


def __getattr__(name: str) -> Any:
    # Imported on first use: both need Django's Tasks framework (optional).
    if name == "ClaimTaskBackend":
        from astral_taskclaim.tasks_backend.backend import ClaimTaskBackend

        return ClaimTaskBackend
    if name == "ClaimTask":
        from astral_taskclaim.tasks_backend.task import ClaimTask

        return ClaimTask
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def connect_backends() -> None:
    """Creates every ``TASKS`` backend that is a :class:`ClaimTaskBackend`,
    so each registers the runner of its queues before a worker asks for it
    (called when the app is ready)."""
    configured = getattr(settings, "TASKS", None)
    if not isinstance(configured, dict):
        return
    try:
        from astral_taskclaim.tasks_backend.backend import ClaimTaskBackend
        from astral_taskclaim.tasks_backend.compat import task_backends
    except ImportError:  # neither Django 6 nor django-tasks: no backend of ours
        return
    for alias, config in configured.items():
        path = config.get("BACKEND") if isinstance(config, dict) else None
        try:
            backend_class = import_string(path) if isinstance(path, str) else None
        except ImportError:
            continue  # the framework's own check reports it
        if isinstance(backend_class, type) and issubclass(backend_class, ClaimTaskBackend):
            task_backends[alias]
