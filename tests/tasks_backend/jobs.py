"""Django Tasks the conformance tests enqueue on ``ClaimTaskBackend``."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from astral_taskclaim.tasks_backend.compat import TaskContext

#: What the tasks saw, for the tests to assert on (reset by a fixture).
calls: list[Any] = []


class Boom(Exception):
    """The failure ``flaky`` and ``always_fails`` raise."""


def _task(**options: Any) -> Any:
    from astral_taskclaim.tasks_backend.compat import FRAMEWORK

    if FRAMEWORK == "django.tasks":
        from django.tasks import task as decorator
    else:
        from django_tasks import task as decorator
    return decorator(**options)


@_task()
def add(a: int, b: int) -> int:
    calls.append(("add", a, b))
    return a + b


@_task()
async def async_add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    calls.append(("async_add", a, b))
    return a + b


@_task(takes_context=True)
def with_context(context: TaskContext, label: str) -> dict[str, Any]:
    calls.append(("with_context", context.task_result.id, context.attempt))
    return {"id": context.task_result.id, "attempt": context.attempt, "label": label}


@_task()
def flaky(failures: int) -> str:
    """Fails its first ``failures`` attempts."""
    calls.append(("flaky", failures))
    if sum(1 for call in calls if call[0] == "flaky") <= failures:
        raise Boom(f"attempt failed ({failures} to go)")
    return "done"


@_task()
def always_fails() -> None:
    calls.append(("always_fails",))
    raise Boom("never works")


@_task(max_retries=0)
def fails_once_for_good() -> None:
    calls.append(("fails_once_for_good",))
    raise Boom("no retries")


@_task(max_retries=0)
def fails_with_odd_text() -> None:
    raise Boom("nul \x00 lone \ud800")  # text PostgreSQL cannot hold as it is


@_task(window_seconds=300)
def refresh(room: int) -> int:
    calls.append(("refresh", room))
    return room


@_task(key=lambda room, **_: f"room:{room}", window_seconds=300)
def refresh_by_key(room: int, reason: str = "") -> str:
    calls.append(("refresh_by_key", room, reason))
    return reason


@_task(priority=0, queue_name="urgent")
def record(label: str) -> str:
    calls.append(("record", label))
    return label


@_task()
def returns_unserialisable() -> object:
    return object()


@_task()
def returns_nan() -> dict[str, float]:
    return {"ratio": float("nan")}


@_task()
def exits(code: int) -> None:
    """Ends the process as a script would: ``sys.exit(code)``."""
    calls.append(("exits", code))
    sys.exit(code)


@_task()
def interrupts() -> None:
    calls.append(("interrupts",))
    raise KeyboardInterrupt


@_task(max_retries=0)
async def sleeps(seconds: float) -> None:
    """Awaits ``seconds``: past a time limit, cancelled."""
    calls.append(("sleeps", seconds))
    await asyncio.sleep(seconds)


@_task(key=lambda doc, **_: f"doc:{doc}", window_seconds=300, trailing="latest")
def rebuild(doc: int, version: int = 0) -> int:
    """A trigger while its key is claimed runs later, as a follow-up."""
    calls.append(("rebuild", doc, version))
    return version
