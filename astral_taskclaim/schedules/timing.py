"""When a schedule's slots fall: a cron expression in a time zone, or a
fixed interval.

Cron expressions are read with ``croniter`` (:data:`FIELD_ORDER`); the zone
is applied here with :mod:`zoneinfo` so daylight saving neither skips nor
doubles a slot: a repeated wall time is its first occurrence, one in the
spring gap falls the gap's length later. An interval's slots are multiples
of its seconds since the epoch, the same in every process.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

_TICK = timedelta(microseconds=1)
_EPOCH = datetime(1970, 1, 1)

#: How croniter reads an expression's fields, as the errors and W053 say it.
FIELD_ORDER = (
    "five fields, minute hour day-of-month month day-of-week, with an optional sixth "
    "for seconds at the end (croniter's order, not Quartz's seconds-first; a seventh "
    "after it is the year)"
)
#: croniter's fields in its order, with the values each takes.
_FIELDS = (
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day of month", "1-31 or L"),
    ("month", "1-12 or jan-dec"),
    ("day of week", "0-7 or sun-sat"),
    ("second", "0-59"),
    ("year", "1970-2099"),
)
#: Fields as croniter splits them (ASCII whitespace only).
_SPLIT = re.compile(r"\S+", re.ASCII)


def _fields(expression: str) -> list[str]:
    return _SPLIT.findall(expression)


def _cron_problem(expression: object) -> str | None:
    """Why croniter cannot read ``expression``, naming each wrong field
    with its value, the order of the fields, and the expression in
    croniter's order where it is a Quartz one (seconds first); ``None``
    for a good expression."""
    if not isinstance(expression, str):
        return f"not a cron expression: {expression!r} (give a string)"
    if croniter.is_valid(expression):
        try:  # without a year field: years gone by still count as firing
            croniter(" ".join(_fields(expression)[:6]), _EPOCH).get_next(datetime)
        except CroniterError:  # February 30th: valid fields, never a date
            return (
                f"{expression!r} never fires: no date matches its day of month, month "
                "and day of week together"
            )
        return None
    fields = _fields(expression)
    count = len(fields)
    if count not in (5, 6, 7):
        why = f"it has {count} field{'s' * (count != 1)}"
    else:
        alone = [  # each field with all the others '*': which ones croniter refuses
            (name, allowed, value)
            for index, (value, (name, allowed)) in enumerate(zip(fields, _FIELDS, strict=False))
            if not croniter.is_valid(
                " ".join(["*"] * index + [value] + ["*"] * (count - index - 1))
            )
        ]
        why = (
            "; ".join(
                f"its {name} field is {value!r} ({name}: {allowed})"
                for name, allowed, value in alone
            )
            or "its fields cannot go together"
        )
    problem = f"not a cron expression: {expression!r}: {why}. A cron expression is {FIELD_ORDER}"
    quartz = quartz_order(expression)
    if quartz is not None:
        problem += f"; read seconds first (Quartz order) it is valid: write it {quartz!r}"
    return problem


def quartz_order(expression: str) -> str | None:
    """``expression`` of six or seven fields read seconds first (Quartz's
    order) and written in croniter's order, if croniter reads it so; else
    ``None``."""
    fields = _fields(expression)
    if len(fields) not in (6, 7) or not croniter.is_valid(expression, second_at_beginning=True):
        return None
    return " ".join([*fields[1:6], fields[0], *fields[6:]])


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
        self.problem: str | None = _cron_problem(expression)
        if self.problem is None and (not isinstance(zone, str) or not zone):
            self.problem = f"zone must be an IANA time zone name, got {zone!r}"
        elif self.problem is None:
            try:
                self.zone = ZoneInfo(zone)
            except (ZoneInfoNotFoundError, ValueError):
                self.problem = f"unknown time zone {zone!r}"

    def __repr__(self) -> str:
        return f"Cron({self.expression!r}, {self.zone_name!r})"

    @property
    def per_minute(self) -> int:
        """The most slots it has in one minute: 1 for five fields, the
        seconds field's values with six or seven (W053 warns above 1)."""
        if self.problem is not None or len(_fields(self.expression)) < 6:
            return 1
        seconds = croniter.expand(self.expression)[0][5]
        return 60 if "*" in seconds else len(seconds)

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
