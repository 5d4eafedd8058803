"""Every schedule with its declaration and its record, for the admin and
``taskclaim_status``: a declared schedule is listed before its first slot
(it has no record yet), a recorded one no longer declared after it is gone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from croniter import CroniterError

from astral_taskclaim.claims.writing import resolve_alias
from astral_taskclaim.schedules.in_database import run_by_pg_cron
from astral_taskclaim.schedules.models import ScheduleRecord
from astral_taskclaim.schedules.schedule import Schedule
from astral_taskclaim.schedules.ticker import declared_schedules
from astral_taskclaim.schedules.timing import Cron, slot_text


def _text(moment: datetime | None) -> str | None:
    return None if moment is None else slot_text(moment)


@dataclass(frozen=True)
class ScheduleRow:
    """One schedule: its declaration (``None`` once no longer declared), its
    record (``None`` before its first slot) and whether a pg_cron job
    enqueues its slots rather than the workers."""

    name: str
    declared: Schedule | None
    record: ScheduleRecord | None
    by_pg_cron: bool = False

    @property
    def expression(self) -> str | None:
        """The cron expression, or how an interval is described."""
        if self.declared is None:
            return None
        timing = self.declared.timing
        return timing.expression if isinstance(timing, Cron) else timing.describe()

    @property
    def zone(self) -> str | None:
        """The zone its slots are read in (``UTC`` for an interval)."""
        if self.declared is None:
            return None
        timing = self.declared.timing
        return timing.zone_name if isinstance(timing, Cron) else "UTC"

    @property
    def enqueued_by(self) -> str | None:
        """``"workers"``, or ``"pg_cron"`` for an in-database schedule whose job is there."""
        if self.declared is None:
            return None
        return "pg_cron" if self.by_pg_cron else "workers"

    def next_slot(self, now: datetime) -> datetime | None:
        """The first slot after ``now``, in the schedule's zone; ``None`` when
        not declared, declared with a timing the system check refuses, or
        with none to come (a cron's years are past)."""
        if self.declared is None or self.declared.timing.problem is not None:
            return None
        timing = self.declared.timing
        try:
            slot = timing.after(now)
        except CroniterError:
            return None
        return slot.astimezone(timing.zone) if isinstance(timing, Cron) else slot

    def as_json(self, now: datetime) -> dict[str, Any]:
        """The row as ``taskclaim_status`` prints it."""
        record = self.record
        return {
            "name": self.name,
            "task": None if self.declared is None else self.declared.target_name,
            "expression": self.expression,
            "zone": self.zone,
            "missed": None if self.declared is None else self.declared.missed,
            "last_slot": _text(record.last_slot if record else None),
            "last_enqueue": _text(record.enqueued_at if record else None),
            "outcome": record.outcome if record else None,
            "slots": record.slots if record else 0,
            "next_slot": _text(self.next_slot(now)),
            "enqueued_by": self.enqueued_by,
        }


def schedule_rows(*, alias: str | None = None) -> list[ScheduleRow]:
    """Every declared schedule, with its record where it has one, then every
    recorded one no longer declared; by name."""
    alias = resolve_alias(alias)
    records = {r.name: r for r in ScheduleRecord.objects.using(alias)}
    found = declared_schedules(alias=alias)
    by_pg_cron = run_by_pg_cron(found, alias)
    rows = [ScheduleRow(s.name, s, records.pop(s.name, None), s.name in by_pg_cron) for s in found]
    rows.extend(ScheduleRow(name, None, record) for name, record in records.items())
    return sorted(rows, key=lambda row: row.name)


def overview(*, alias: str | None = None, now: datetime | None = None) -> list[dict[str, Any]]:
    """One JSON-ready dict per schedule (:func:`schedule_rows`): name, task,
    expression, zone, last slot, last enqueue, outcome, slots enqueued,
    next slot, and who enqueues the slots (``enqueued_by``: ``"workers"``,
    or ``"pg_cron"`` for an in-database schedule whose job is there)."""
    now = now or datetime.now(UTC)
    return [row.as_json(now) for row in schedule_rows(alias=alias)]
