"""When a schedule's slots fall: a cron expression in a time zone, or a
fixed interval.

A cron slot is a wall-clock time of the schedule's zone that matches the
expression, read with ``croniter`` (a well-kept parser of the classic five
fields, a sixth for seconds, ``@hourly`` and friends). The zone is applied
here, with :mod:`zoneinfo`, so daylight saving changes neither skip nor
double a slot: a wall time that happens twice (the autumn hour) is its
first occurrence, one that does not happen (the spring gap) falls the length
of the gap later, at the instant the wall clock would have shown it had the
clocks not moved; two wall times landing on one instant are one slot.

An interval's slots are the multiples of its seconds since the Unix epoch,
so every process computes the same slots with no shared state.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

__all__ = ["Cron", "Every", "Timing", "slot_text"]

_TICK = timedelta(microseconds=1)


def slot_text(slot: datetime) -> str:
    """A slot's name in keys and logs: its UTC instant, ``2026-03-29T01:30:00Z``."""
    return slot.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Timing:
    """Slots of a schedule: :meth:`slots_back` walks them newest first."""

    #: Why the timing cannot work (reported by a system check), or ``None``.
    problem: str | None = None

    def slots_back(self, now: datetime) -> Iterator[datetime]:
        """The slots at or before ``now`` (aware), newest first, as UTC instants."""
        raise NotImplementedError

    def after(self, moment: datetime) -> datetime:
        """The first slot strictly after ``moment``."""
        raise NotImplementedError

    def latest(self, now: datetime) -> datetime | None:
        """The newest slot at or before ``now``, ``None`` if there is none."""
        return next(self.slots_back(now), None)

    def describe(self) -> str:
        """The expression as people read it in the admin and the status."""
        raise NotImplementedError


class Every(Timing):
    """A slot every ``seconds`` (a whole number from 1), at the multiples
    of ``seconds`` since 1970-01-01 UTC."""

    def __init__(self, seconds: int) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
            raise ValueError(
                f"an interval must be a whole number of seconds from 1, got {seconds!r}"
            )
        self.seconds = seconds

    def __repr__(self) -> str:
        return f"Every({self.seconds})"

    def slots_back(self, now: datetime) -> Iterator[datetime]:
        step = int(now.timestamp()) // self.seconds
        while step >= 0:
            yield datetime.fromtimestamp(step * self.seconds, UTC)
            step -= 1

    def after(self, moment: datetime) -> datetime:
        step = int(moment.timestamp()) // self.seconds + 1
        return datetime.fromtimestamp(step * self.seconds, UTC)

    def describe(self) -> str:
        return f"every {self.seconds} s"


class Cron(Timing):
    """Slots where ``expression`` matches the wall clock of ``zone`` (an
    IANA name, ``"UTC"`` by default). An expression croniter cannot read or
    an unknown zone is kept as :attr:`problem`, which the system check
    ``astral_taskclaim.E050`` reports naming the task, at start-up."""

    def __init__(self, expression: str, zone: str = "UTC") -> None:
        self.expression = expression
        self.zone_name = zone
        self.zone: tzinfo = UTC
        self.problem: str | None = None
        if not isinstance(expression, str) or not croniter.is_valid(expression):
            self.problem = f"not a cron expression: {expression!r}"
        elif not isinstance(zone, str) or not zone:
            self.problem = f"zone must be an IANA time zone name, got {zone!r}"
        else:
            try:
                self.zone = ZoneInfo(zone)
            except (ZoneInfoNotFoundError, ValueError):
                self.problem = f"unknown time zone {zone!r}"

    def __repr__(self) -> str:
        return f"Cron({self.expression!r}, {self.zone_name!r})"

    def _instant(self, wall: datetime) -> datetime:
        # fold=0: an ambiguous wall time is its first occurrence; a missing
        # one keeps the offset before the gap, which lands it the gap's
        # length later. Either way each wall slot is exactly one instant.
        return wall.replace(tzinfo=self.zone, fold=0).astimezone(UTC)

    def slots_back(self, now: datetime) -> Iterator[datetime]:
        wall = now.astimezone(self.zone).replace(tzinfo=None)
        walls = croniter(self.expression, wall + _TICK)
        newer: datetime | None = None
        while True:
            try:
                slot = self._instant(walls.get_prev(datetime))
            except CroniterError:
                return  # before the first year croniter knows
            if slot > now or (newer is not None and slot >= newer):
                continue  # a spring-gap time landing after now, or on a slot above
            newer = slot
            yield slot

    def after(self, moment: datetime) -> datetime:
        wall = moment.astimezone(self.zone).replace(tzinfo=None)
        # Start a gap's length early: a wall time in the spring gap lands
        # later than its wall reading says.
        walls = croniter(self.expression, wall - timedelta(hours=3))
        while True:
            slot = self._instant(walls.get_next(datetime))
            if slot > moment:
                return slot

    def describe(self) -> str:
        return f"{self.expression} ({self.zone_name})"
