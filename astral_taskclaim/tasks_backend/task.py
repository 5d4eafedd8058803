"""``ClaimTask``: a Django Task that may coalesce its runs per key and window.

The backend's ``task_class``, so Django's ``@task`` decorator takes its
options as keyword arguments::

    @task(window_seconds=300)                      # key from the arguments
    def refresh_room(room_id: int) -> None: ...

    @task(key=lambda room_id, **_: f"room:{room_id}", window_seconds=300)
    def refresh_room_by_key(room_id: int, reason: str = "") -> None: ...

    refresh_room.using(key="room:all", window_seconds=60).enqueue(0)

    @task(window_seconds=300, trailing="latest")   # a trigger on a claimed key runs later
    def rebuild_index(project_id: int) -> None: ...

Options live on the Task, as ``priority`` and ``queue_name`` do, because
coalescing is a property of the work (its identity and how often it may
run), and ``using()`` changes them per call like the framework's own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.conf import global_settings as default
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from astral_taskclaim.core.validation import (
    MAX_KEY_BYTES,
    Debounce,
    Trailing,
    TrailingOption,
    max_retries_problem,
    validate_key,
    validate_trailing,
    validate_window,
)
from astral_taskclaim.tasks_backend.compat import (
    DEFAULT_TASK_BACKEND_ALIAS,
    InvalidTask,
    Task,
    task_backends,
)
from astral_taskclaim.tasks_backend.compat import task as django_task

# Where ``TASKS`` names this app's backend.
_BACKEND_PATH = "astral_taskclaim.tasks_backend.ClaimTaskBackend"
# The options :class:`ClaimTask` adds to Django's ``Task``.
_TASK_OPTIONS = ("window_seconds", "key", "max_retries", "trailing")

#: ``key``: a fixed key, or a function of the task's arguments returning one.
_KeySource = str | Callable[..., str]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimTask(Task):  # type: ignore[misc]
    """A Django Task with the app's options.

    ``window_seconds``
        Turns coalescing on: while a run of the same key is queued, or
        within this many seconds after it started (and through its
        retries), ``enqueue()`` queues nothing and returns that run's
        ``TaskResult``. More than 0, as for ``@claimed_task``. ``None``
        (the default): every enqueue runs.
    ``key``
        The coalescing key: a string, or a function called with the
        enqueue's arguments. Default: the task's dotted path and its
        arguments as canonical JSON (hashed when longer than a key may be).
    ``max_retries``
        Retries after a failed attempt (the backend's ``max_retries``
        option when ``None``).
    ``trailing``
        As ``@claimed_task``'s (``"latest"``, ``"first"``, a ``Debounce``;
        needs ``window_seconds``): an ``enqueue()`` that finds the key
        claimed makes, or merges into, the key's one pending follow-up run,
        due when the claim ends, and returns that run's ``TaskResult``.
    """

    window_seconds: float | None = None
    key: _KeySource | None = None
    max_retries: int | None = None
    trailing: TrailingOption = None

    def using(  # type: ignore[override]
        self,
        *,
        priority: int | None = None,
        queue_name: str | None = None,
        run_after: datetime | None = None,
        backend: str | None = None,
        key: _KeySource | None = None,
        window_seconds: float | None = None,
        max_retries: int | None = None,
        trailing: TrailingOption = None,
    ) -> ClaimTask:
        """Django's ``using()``, also for ``key``, ``window_seconds``,
        ``max_retries`` and ``trailing`` (``False`` turns it off)."""
        changed = Task.using(
            self, priority=priority, queue_name=queue_name, run_after=run_after, backend=backend
        )
        options = {
            "key": key,
            "window_seconds": window_seconds,
            "max_retries": max_retries,
            "trailing": trailing,
        }
        given = {name: value for name, value in options.items() if value is not None}
        return replace(changed, **given) if given else changed  # type: ignore[no-any-return]


def checked_task(function: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """Django's ``@task``, with the same arguments, that first checks the
    task's backend takes the options given (``window_seconds``, ``key``,
    ``max_retries``, ``trailing``): when it is not a ``ClaimTaskBackend`` (``TASKS``
    unset or ``backend=`` naming another), ``ImproperlyConfigured`` naming
    ``TASKS``, the alias, the option and this backend's path, where
    Django's own decorator raises ``TypeError: Task.__init__() got an
    unexpected keyword argument``."""
    given = [name for name in _TASK_OPTIONS if name in kwargs]
    alias = kwargs.get("backend", DEFAULT_TASK_BACKEND_ALIAS)

    def decorate(func: Callable[..., Any]) -> Any:
        if given:
            _check_backend(func, alias, given[0])
        return django_task(**kwargs)(func)

    return decorate(function) if function is not None else decorate


def _check_backend(func: Callable[..., Any], alias: str, option: str) -> None:
    backend = task_backends[alias]
    task_class = getattr(backend, "task_class", None)
    if isinstance(task_class, type) and issubclass(task_class, ClaimTask):
        return
    kind = type(backend)
    configured = getattr(settings, "TASKS", None)  # Django 5.2 has no default
    unset = configured is None or configured == getattr(default, "TASKS", None)
    why = " (TASKS is not set: Django's default)" if unset else ""
    name = f"{func.__module__}.{func.__qualname__}"
    raise ImproperlyConfigured(
        f"{name}: @task({option}=...) needs the task's backend TASKS[{alias!r}] to be "
        f"{_BACKEND_PATH!r}, but it is {kind.__module__}.{kind.__qualname__}{why}; set "
        f"TASKS[{alias!r}]['BACKEND'] to {_BACKEND_PATH!r}, or give the task backend= "
        "naming one that is"
    )


def validate_options(task: Any) -> None:
    """``InvalidTask`` for a bad ``key``, ``window_seconds``, ``max_retries``
    or ``trailing``."""
    window = getattr(task, "window_seconds", None)
    if trailing_mode(task) is not None and window is None:
        raise InvalidTask(f"{task.module_path}: trailing needs window_seconds to coalesce runs")
    key = getattr(task, "key", None)
    retries = getattr(task, "max_retries", None)
    if window is not None:
        try:
            validate_window(window)  # @claimed_task's rule: more than 0 too
        except (TypeError, ValueError) as error:
            raise InvalidTask(f"{task.module_path}: {error}") from error
    if key is not None:
        if window is None:
            raise InvalidTask(f"{task.module_path}: key needs window_seconds to coalesce runs")
        if not (isinstance(key, str) or callable(key)):
            raise InvalidTask(
                f"{task.module_path}: key must be a str or a function of the task's "
                f"arguments, got {type(key).__name__}"
            )
        if isinstance(key, str):
            _checked_key(task, key)
    problem = None if retries is None else max_retries_problem(retries)
    if problem is not None:
        raise InvalidTask(f"{task.module_path}: {problem}")


def trailing_mode(task: Any) -> Trailing | Debounce | None:
    """``task``'s trailing mode (``None``: off); ``InvalidTask`` for a bad one."""
    try:
        return validate_trailing(getattr(task, "trailing", None))
    except ValueError as error:
        raise InvalidTask(f"{task.module_path}: {error}") from error


def coalescing_key(task: Any, args: list[Any], kwargs: dict[str, Any]) -> str | None:
    """The key a run of ``task`` with these (JSON-normalised) arguments
    claims, or ``None`` when the task does not coalesce."""
    if getattr(task, "window_seconds", None) is None:
        return None
    source = getattr(task, "key", None)
    if isinstance(source, str):
        return source
    if callable(source):
        return _checked_key(task, source(*args, **kwargs))
    canonical = json.dumps([args, kwargs], sort_keys=True, separators=(",", ":"))
    key = f"{task.module_path}:{canonical}"
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
        key = f"{task.module_path}:sha256:{digest}"
    return key


def _checked_key(task: Any, key: object) -> str:
    try:
        return validate_key(key)
    except (TypeError, ValueError) as error:
        raise InvalidTask(f"{task.module_path}: {error}") from error
