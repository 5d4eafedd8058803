"""``refresh_room``: the claimed task of queue ``refresh``.

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

from astral_taskclaim.tasks import RetryAfter, claimed_task

from .models import Room

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
