"""ClaimTaskBackend: what validate_task refuses, and check()."""

from __future__ import annotations

import math
import subprocess
import sys
from datetime import datetime
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from astral_taskclaim.core.validation import MAX_SECONDS
from astral_taskclaim.tasks import ClaimedTask
from astral_taskclaim.tasks_backend import checked_task
from astral_taskclaim.tasks_backend.compat import FRAMEWORK, InvalidTask, task_backends
from astral_taskclaim.tasks_backend.task import ClaimTask

from . import jobs


def _nested() -> Any:
    def inner() -> None:
        return None

    return inner


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"priority": 101}, "priority"),
        ({"queue_name": "elsewhere"}, "elsewhere"),
        ({"window_seconds": -1}, "window_seconds"),
        ({"key": "room:1"}, "key needs window_seconds"),
        ({"key": 42, "window_seconds": 10}, "key must be a str"),
        ({"key": "", "window_seconds": 10}, "empty"),
        ({"max_retries": -1}, "max_retries"),
        ({"run_after": datetime(2030, 1, 1)}, "aware"),
    ],
)
def test_validate_task_refuses_what_the_backend_cannot_do(
    change: dict[str, Any], message: str
) -> None:
    from dataclasses import replace

    with pytest.raises(InvalidTask, match=message):
        replace(jobs.add, **change)


def test_a_function_not_at_module_level_is_refused() -> None:
    with pytest.raises(InvalidTask, match="module level"):
        type(jobs.add)(func=_nested())


def test_priority_is_refused_on_a_remote_queue() -> None:
    queues = {"mem": {"BACKEND": "astral_taskclaim.queues.memory.MemoryQueue"}}
    tasks = {
        "default": {
            "BACKEND": "astral_taskclaim.tasks_backend.ClaimTaskBackend",
            "QUEUES": ["default", "urgent"],
            "OPTIONS": {"queue": "mem"},
        }
    }
    with (
        override_settings(TASKCLAIM_QUEUES=queues, TASKS=tasks),
        pytest.raises(InvalidTask, match="priority"),
    ):
        jobs.add.using(priority=5)


def test_check_reports_bad_options_and_enqueue_refuses_them() -> None:
    tasks = {
        "default": {
            "BACKEND": "astral_taskclaim.tasks_backend.ClaimTaskBackend",
            "QUEUES": ["default", "urgent"],
            "OPTIONS": {"queue": "nope", "max_retries": "3", "colour": "red"},
        }
    }
    with override_settings(TASKS=tasks):
        messages = task_backends["default"].check()
        texts = " | ".join(str(m.msg) for m in messages)
        assert {m.id for m in messages} == {"astral_taskclaim.E033"}
        assert "'nope'" in texts
        assert "max_retries" in texts
        assert "'colour'" in texts
        from django.core.exceptions import ImproperlyConfigured

        with pytest.raises(ImproperlyConfigured, match="nope"):
            jobs.add.enqueue(1, 2)


def test_the_framework_runs_the_backends_check() -> None:
    from django.core import checks

    tasks = {
        "default": {
            "BACKEND": "astral_taskclaim.tasks_backend.ClaimTaskBackend",
            "OPTIONS": {"queue": "nope"},
        }
    }
    [check_tasks] = [
        c for c in checks.registry.registry.get_checks() if c.__name__ == "check_tasks"
    ]
    with override_settings(TASKS=tasks):
        ids = {message.id for message in check_tasks()}
    assert "astral_taskclaim.E033" in ids


@pytest.mark.parametrize("typo", ["QUEUE", "max_retry"])
def test_an_unknown_option_is_a_check_error_naming_it_and_the_known_ones(typo: str) -> None:
    from django.core import checks

    tasks = {
        "default": {
            "BACKEND": "astral_taskclaim.tasks_backend.ClaimTaskBackend",
            "OPTIONS": {typo: "default"},
        }
    }
    [check_tasks] = [
        c for c in checks.registry.registry.get_checks() if c.__name__ == "check_tasks"
    ]
    with override_settings(TASKS=tasks):  # the runners are set from it: no exception
        [message] = check_tasks()
    assert message.id == "astral_taskclaim.E033"
    assert message.msg == (
        f"TASKS['default']: unknown option {typo!r}; known: max_retries, queue, queues, time_limit"
    )


WINDOWS_CLAIMED_TASKS_REFUSE = [0, 0.0, -1, math.nan, math.inf, True, "300", MAX_SECONDS + 1]


@pytest.mark.parametrize("window", WINDOWS_CLAIMED_TASKS_REFUSE)
def test_a_window_claimed_task_refuses_is_refused_at_decoration_naming_task_and_value(
    window: object,
) -> None:
    with pytest.raises((TypeError, ValueError)) as claimed:
        ClaimedTask(
            print, queue="q", max_retries=0, parse=None, retry_after_ms=None, window_seconds=window
        )
    with pytest.raises(InvalidTask) as decorated:
        jobs._task(window_seconds=window)(jobs.add.func)
    message = str(decorated.value)
    # The same words, from the same check, after the task's name.
    assert message == f"{jobs.add.module_path}: {claimed.value}"
    if not isinstance(window, str | bool):
        assert repr(window) in message
    with pytest.raises(InvalidTask, match="window_seconds"):
        jobs.refresh.using(window_seconds=window)


IMMEDIATE = f"{FRAMEWORK}.backends.immediate.ImmediateBackend"
BACKEND_PATH = "astral_taskclaim.tasks_backend.ClaimTaskBackend"


@pytest.mark.parametrize("option", [{"window_seconds": 60}, {"key": "k"}, {"max_retries": 1}])
def test_an_option_on_another_backend_names_tasks_the_alias_and_this_backend(
    option: dict[str, Any],
) -> None:
    [name] = option
    django_default = {"default": {"BACKEND": IMMEDIATE}}
    with override_settings(TASKS=django_default), pytest.raises(ImproperlyConfigured) as raised:
        checked_task(**option)(jobs.add.func)
    message = str(raised.value)
    assert message.startswith(f"{jobs.add.module_path}: @task({name}=...) needs ")
    for part in ("TASKS['default']", BACKEND_PATH, IMMEDIATE):
        assert part in message
    # backend= naming a backend of another kind, TASKS configured.
    tasks = {
        "default": {"BACKEND": BACKEND_PATH, "QUEUES": ["default", "urgent"]},
        "other": {"BACKEND": IMMEDIATE},
    }
    with override_settings(TASKS=tasks), pytest.raises(ImproperlyConfigured, match="'other'"):
        checked_task(backend="other", **option)(jobs.add.func)


UNSET = """
import django
from django.conf import settings
settings.configure()  # no TASKS: Django's default, its ImmediateBackend
django.setup()
from astral_taskclaim.tasks_backend import checked_task
def work(): pass
work.__module__ = "projects.tasks"
checked_task(window_seconds=60)(work)
"""


def test_without_tasks_set_the_error_says_so() -> None:
    ran = subprocess.run(  # a fresh process: this one's TASKS is set
        [sys.executable, "-c", UNSET], capture_output=True, text=True, timeout=120, check=False
    )
    last = ran.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "django.core.exceptions.ImproperlyConfigured: projects.tasks.work: "
        "@task(window_seconds=...) needs the task's backend TASKS['default'] to be "
        f"'{BACKEND_PATH}', but it is {IMMEDIATE} (TASKS is not set: Django's default)"
    )


def test_checked_task_is_djangos_task_on_this_backend() -> None:
    made = checked_task(window_seconds=60, queue_name="urgent")(jobs.add.func)
    assert isinstance(made, ClaimTask)
    assert (made.window_seconds, made.queue_name) == (60, "urgent")
    assert checked_task(jobs.add.func).module_path == jobs.add.module_path  # bare
    # Without the app's options, any backend: Django's decorator, unchecked.
    with override_settings(TASKS={"default": {"BACKEND": IMMEDIATE}}):
        assert type(checked_task(priority=1)(jobs.add.func)).__name__ == "Task"
