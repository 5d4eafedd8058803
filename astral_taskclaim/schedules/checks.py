"""System check E050: a schedule that cannot work, named with its task
(registered by :mod:`astral_taskclaim.checks`)."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.schedules import Schedule, from_settings, schedules

__all__ = ["check_schedules", "schedule_problem"]

ID = "astral_taskclaim.{}"


def schedule_problem(schedule: Schedule) -> str | None:
    """Why ``schedule`` cannot work (E050's text), or ``None``."""
    problem = schedule.timing.problem
    if problem is None and schedule.kind == "claimed" and schedule.target.window_seconds is None:
        problem = "the claimed task declares no window_seconds, which each slot's enqueue needs"
    if problem is None and schedule.kind == "django":
        try:
            backend = schedule.target.get_backend()
        except Exception as error:  # the framework's own lookup error, whatever its class
            return f"its Tasks backend cannot be loaded: {error}"
        if not callable(getattr(backend, "queue_for", None)):
            problem = "the Django Task's backend is not a ClaimTaskBackend"
    return problem


@checks.register()
def check_schedules(**kwargs: Any) -> list[checks.CheckMessage]:
    """E050 for a schedule that cannot work, naming it and its task."""
    try:
        found = [*schedules, *from_settings(app_settings.SCHEDULES)]
    except ImproperlyConfigured as error:
        return [checks.Error(str(error), id=ID.format("E050"))]
    return [
        checks.Error(
            f"schedule {schedule.name} of task {schedule.target_name}: {problem}",
            obj=schedule.name,
            id=ID.format("E050"),
        )
        for schedule in found
        if (problem := schedule_problem(schedule)) is not None
    ]
