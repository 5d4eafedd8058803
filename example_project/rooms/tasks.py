"""``refresh_room``: the claimed task of queue ``refresh``; and
``count_refreshed_rooms``, a Django ``@task`` on the ``tasks`` queue, also
run every second by a schedule (the demo's workers enqueue its slots).

It fails now and then, and sometimes asks to be retried later (a
``Retry-After`` of 45 s, as a rate-limited API would), so retries, backoff
and give-ups show in the demo. The rates come from the settings
``ROOMS_FAILURE_RATE`` (default 0.15) and ``ROOMS_RETRY_AFTER_RATE`` (0.1).
"""

from __future__ import annotations

import random
from typing import Any

from django.conf import settings
from django.db.models import F
from django.db.models.functions import Now

from astral_taskclaim.schedules import every, periodic
from astral_taskclaim.tasks import RetryAfter, claimed_task

from .models import Room

try:  # Django 6
    from django.tasks import task
except ImportError:  # Django 5.2 with django-tasks
    from django_tasks import task  # type: ignore[no-redef]

RETRY_AFTER_MS = 45_000
_chance = random.Random()


class RefreshFailed(Exception):
    """The (pretend) upstream refresh failed."""


def parse_refresh(task: Any) -> dict[str, int] | None:
    """``{"room": id}`` with an int id, or ``None`` (unparseable)."""
    if isinstance(task, dict) and isinstance(task.get("room"), int):
        return {"room": task["room"]}
    return None


@claimed_task(queue="refresh", max_retries=3, parse=parse_refresh, window_seconds=300)
def refresh_room(task: dict[str, int]) -> None:
    """Refreshes a room (counts it); fails or asks for a Retry-After by chance."""
    roll = _chance.random()
    failure_rate = getattr(settings, "ROOMS_FAILURE_RATE", 0.15)
    if roll < failure_rate:
        raise RefreshFailed(f"room {task['room']}: upstream error")
    if roll < failure_rate + getattr(settings, "ROOMS_RETRY_AFTER_RATE", 0.1):
        raise RetryAfter(RETRY_AFTER_MS, f"room {task['room']}: rate limited")
    Room.objects.filter(pk=task["room"]).update(
        refresh_count=F("refresh_count") + 1, refreshed_at=Now()
    )


#: The schedule's name; its slots' keys name the slot, so each is one run.
REPORT_SCHEDULE = "rooms.report"


@periodic(every(1), name=REPORT_SCHEDULE, key="rooms:report:{slot}")
@task(window_seconds=60)
def count_refreshed_rooms() -> int:
    """How many rooms were refreshed: a report many triggers ask for, run
    at most once a minute (its enqueues coalesce into one run)."""
    return Room.objects.filter(refresh_count__gt=0).count()
