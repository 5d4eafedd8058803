"""Every schedule with its declaration and its record, for the admin and
``taskclaim_status``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from astral_taskclaim.claims.writing import resolve_alias
from astral_taskclaim.schedules.in_database import run_by_pg_cron
from astral_taskclaim.schedules.models import ScheduleRecord
from astral_taskclaim.schedules.ticker import declared_schedules
from astral_taskclaim.schedules.timing import Cron, slot_text

__all__ = ["overview"]


def _text(moment: datetime | None) -> str | None:
    return None if moment is None else slot_text(moment)


def overview(*, alias: str | None = None, now: datetime | None = None) -> list[dict[str, Any]]:
    """One JSON-ready dict per schedule, declared or only recorded (a
    schedule since removed): name, task, expression, zone, last slot, last
    enqueue, outcome, slots enqueued, next slot, and who enqueues the slots
    (``enqueued_by``: ``"workers"``, or ``"pg_cron"`` for an in-database
    schedule whose job is there)."""
    now = now or datetime.now(UTC)
    alias = resolve_alias(alias)
    records = {r.name: r for r in ScheduleRecord.objects.using(alias)}
    rows = []
    found = declared_schedules(alias=alias)
    by_pg_cron = run_by_pg_cron(found, alias)
    for schedule in found:
        record = records.pop(schedule.name, None)
        timing = schedule.timing
        rows.append(
            {
                "name": schedule.name,
                "task": schedule.target_name,
                "expression": timing.expression if isinstance(timing, Cron) else timing.describe(),
                "zone": timing.zone_name if isinstance(timing, Cron) else "UTC",
                "missed": schedule.missed,
                "last_slot": _text(record.last_slot if record else None),
                "last_enqueue": _text(record.enqueued_at if record else None),
                "outcome": record.outcome if record else None,
                "slots": record.slots if record else 0,
                "next_slot": slot_text(timing.after(now)),
                "enqueued_by": "pg_cron" if schedule.name in by_pg_cron else "workers",
            }
        )
    for name, record in records.items():
        rows.append(
            {
                "name": name,
                "task": None,
                "expression": None,
                "zone": None,
                "missed": None,
                "last_slot": _text(record.last_slot),
                "last_enqueue": _text(record.enqueued_at),
                "outcome": record.outcome,
                "slots": record.slots,
                "next_slot": None,
                "enqueued_by": None,
            }
        )
    return sorted(rows, key=lambda row: row["name"])
