"""Django's Tasks framework, from Django 6 (``django.tasks``) or, on Django
5.2, from the ``django-tasks`` package (``django_tasks``, the
``astral-taskclaim[tasks]`` extra): the one place that knows which.

Both expose the same classes; only the exception names differ
(``InvalidTask`` is ``InvalidTaskError`` in the package).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Typed as Any: the two modules' stubs differ (django-stubs covers
    # django.tasks on Django 6 only), and the code must check on both.
    FRAMEWORK: str
    DEFAULT_TASK_BACKEND_ALIAS: str
    BaseTaskBackend: Any
    InvalidTask: Any
    Task: Any
    TaskContext: Any
    TaskError: Any
    TaskResult: Any
    TaskResultDoesNotExist: Any
    TaskResultStatus: Any
    normalize_json: Any
    task: Any
    task_backends: Any
    task_enqueued: Any
    task_finished: Any
    task_started: Any
else:
    try:
        from django.tasks import (
            DEFAULT_TASK_BACKEND_ALIAS,
            TaskContext,
            TaskResult,
            TaskResultStatus,
            task,
            task_backends,
        )
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import (
            Task,
            TaskError,
        )
        from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
        from django.tasks.signals import task_enqueued, task_finished, task_started
        from django.utils.json import normalize_json

        FRAMEWORK = "django.tasks"
    except ImportError:  # Django 5.2: the django-tasks package
        from django_tasks import (
            DEFAULT_TASK_BACKEND_ALIAS,
            TaskContext,
            TaskResult,
            TaskResultStatus,
            task,
            task_backends,
        )
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import (
            Task,
            TaskError,
        )
        from django_tasks.exceptions import (
            InvalidTaskError as InvalidTask,
        )
        from django_tasks.exceptions import TaskResultDoesNotExist
        from django_tasks.signals import (
            task_enqueued,
            task_finished,
            task_started,
        )
        from django_tasks.utils import normalize_json

        FRAMEWORK = "django_tasks"

__all__ = [
    "DEFAULT_TASK_BACKEND_ALIAS",
    "FRAMEWORK",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "normalize_json",
    "set_return_value",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]


def set_return_value(result: Any, value: Any) -> None:
    """Sets a frozen ``TaskResult``'s return value, as Django's own
    backends do (the field is not an ``__init__`` argument)."""
    object.__setattr__(result, "_return_value", value)
