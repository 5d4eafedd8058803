"""ClaimTaskBackend: what validate_task refuses, and check()."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from django.test import override_settings

from astral_taskclaim.tasks_backend.compat import InvalidTask, task_backends

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
