"""A backend for Django's Tasks framework on the app's queues.

``TASKS = {"default": {"BACKEND": "astral_taskclaim.tasks_backend.ClaimTaskBackend"}}``
(see :mod:`.backend`). Needs Django 6, or Django 5.2 with the
``django-tasks`` package; the names are imported on first use, so the rest
of the app works without either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from astral_taskclaim.tasks import registry

if TYPE_CHECKING:
    from astral_taskclaim.tasks_backend.backend import ClaimTaskBackend
    from astral_taskclaim.tasks_backend.task import ClaimTask, checked_task

__all__ = ["ClaimTask", "ClaimTaskBackend", "checked_task", "register_runners"]


def __getattr__(name: str) -> Any:
    # Imported on first use: they need Django's Tasks framework (optional).
    if name == "ClaimTaskBackend":
        from astral_taskclaim.tasks_backend.backend import ClaimTaskBackend

        return ClaimTaskBackend
    if name in ("ClaimTask", "checked_task"):
        from astral_taskclaim.tasks_backend import task

        return getattr(task, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register_runners(*, setting: str | None = None, **kwargs: Any) -> None:
    """Gives the task registry a :class:`~.runner.TaskRunner` for each queue
    a :class:`ClaimTaskBackend` of ``TASKS`` sends to, read from the
    settings (no backend is made): called when the app is ready, and as the
    receiver of ``setting_changed`` when ``TASKS`` or ``TASKCLAIM_QUEUES``
    change. ``ImproperlyConfigured`` for a queue two backends send to, or
    one that claimed tasks use."""
    if setting not in (None, "TASKS", "TASKCLAIM_QUEUES"):
        return
    try:
        from astral_taskclaim.tasks_backend.backend import BackendOptions, ClaimTaskBackend
        from astral_taskclaim.tasks_backend.runner import TaskRunner
    except ImportError:  # neither Django 6 nor django-tasks: no backend of ours
        return
    configured = getattr(settings, "TASKS", None)
    runners: list[tuple[str, TaskRunner]] = []
    for alias, config in configured.items() if isinstance(configured, dict) else ():
        path = config.get("BACKEND") if isinstance(config, dict) else None
        try:
            backend_class = import_string(path) if isinstance(path, str) else None
        except ImportError:
            continue  # the framework's own check reports it
        if not (isinstance(backend_class, type) and issubclass(backend_class, ClaimTaskBackend)):
            continue
        options = config.get("OPTIONS", {})
        try:
            read = BackendOptions.read(options if isinstance(options, dict) else {})
        except ImproperlyConfigured:
            continue  # a malformed TASKCLAIM_QUEUES: check E006 reports it
        runners += [
            (
                queue,
                TaskRunner(
                    backend_alias=alias,
                    queue=queue,
                    max_retries=read.max_retries,
                    time_limit=read.time_limit,
                ),
            )
            for queue in read.carrying
        ]
    registry.set_runners(runners)
