"""Periodic tasks with no scheduler process: every worker schedules, the
claim of each slot makes it enqueue once (docs: "Periodic tasks").

::

    from astral_taskclaim.schedules import cron, every, periodic

    @periodic(cron("0 * * * *", zone="Europe/Berlin"), key="report:hourly", task={})
    @claimed_task(queue="reports", window_seconds=300)
    def report(task): ...
"""

from __future__ import annotations

from astral_taskclaim.schedules.schedule import (
    MISSED,
    Schedule,
    ScheduleRegistry,
    cron,
    every,
    from_settings,
    periodic,
    schedules,
)
from astral_taskclaim.schedules.ticker import Scheduler, declared_schedules, slot_key
from astral_taskclaim.schedules.timing import Cron, Every, Timing, slot_text

__all__ = [
    "MISSED",
    "Cron",
    "Every",
    "Schedule",
    "ScheduleRegistry",
    "Scheduler",
    "Timing",
    "cron",
    "declared_schedules",
    "every",
    "from_settings",
    "periodic",
    "schedules",
    "slot_key",
    "slot_text",
]
