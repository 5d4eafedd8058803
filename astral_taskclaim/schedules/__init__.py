"""Periodic tasks with no scheduler process: every worker schedules, the
claim of each slot makes it enqueue once (docs: "Periodic tasks").

::

    from astral_taskclaim.schedules import cron, every, periodic

    @periodic(cron("0 * * * *", zone="Europe/Berlin"), key="report:hourly", task={})
    @claimed_task(queue="reports", window_seconds=300)
    def report(task): ...
"""

from __future__ import annotations

from astral_taskclaim.schedules.schedule import cron, every, periodic, schedules
from astral_taskclaim.schedules.ticker import Scheduler
from astral_taskclaim.schedules.timing import Every

__all__ = [
    "Every",
    "Scheduler",
    "cron",
    "every",
    "periodic",
    "schedules",
]
