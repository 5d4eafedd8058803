"""Slots of cron expressions in a time zone and of fixed intervals, across
daylight-saving changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from astral_taskclaim.schedules import Cron, Every, slot_text

BERLIN = ZoneInfo("Europe/Berlin")


def slots_between(timing: Cron | Every, start: datetime, end: datetime) -> list[datetime]:
    """The slots in (start, end], walked forwards with after()."""
    found, moment = [], start
    while (moment := timing.after(moment)) <= end:
        found.append(moment)
    return found


def walls(slots: list[datetime]) -> list[str]:
    return [slot.astimezone(BERLIN).strftime("%H:%M%z") for slot in slots]


def day(month: int, date: int) -> tuple[datetime, datetime]:
    start = datetime(2026, month, date, tzinfo=BERLIN)
    return start - timedelta(microseconds=1), start + timedelta(days=1) - timedelta(seconds=1)


def test_hourly_in_berlin_on_the_spring_change_has_each_wall_hour_once() -> None:
    slots = slots_between(Cron("0 * * * *", "Europe/Berlin"), *day(3, 29))
    # 02:00 does not exist that day: it lands on 03:00, which is one slot.
    assert walls(slots)[:4] == ["00:00+0100", "01:00+0100", "03:00+0200", "04:00+0200"]
    assert len(slots) == len(set(slots)) == 23


def test_hourly_in_berlin_on_the_autumn_change_has_each_wall_hour_once() -> None:
    slots = slots_between(Cron("0 * * * *", "Europe/Berlin"), *day(10, 25))
    # 02:00 happens twice that day: its first occurrence is the slot.
    assert walls(slots)[:4] == ["00:00+0200", "01:00+0200", "02:00+0200", "03:00+0100"]
    assert len(slots) == len(set(slots)) == 24


@pytest.mark.parametrize(
    ("month", "date", "expected"),
    [(3, 29, "03:30+0200"), (10, 25, "02:30+0200"), (3, 28, "02:30+0100")],
)
def test_half_past_two_runs_once_on_either_change(month: int, date: int, expected: str) -> None:
    assert walls(slots_between(Cron("30 2 * * *", "Europe/Berlin"), *day(month, date))) == [
        expected
    ]


@pytest.mark.parametrize("expression", ["0 * * * *", "30 2 * * *", "*/7 * * * *"])
def test_walking_back_finds_the_same_slots_as_walking_forward(expression: str) -> None:
    timing = Cron(expression, "Europe/Berlin")
    for month, date in ((3, 29), (10, 25)):
        start, end = day(month, date)
        forward = slots_between(timing, start, end)
        back = []
        for slot in timing.slots_back(end):
            if slot <= start:
                break
            back.append(slot)
        assert back[::-1] == forward
        assert timing.latest(forward[-1]) == forward[-1]  # a slot is due at its instant


def test_an_interval_is_anchored_at_the_epoch_so_every_process_agrees() -> None:
    timing = Every(10)
    now = datetime(2026, 12, 1, 9, 0, 17, 500000, tzinfo=UTC)
    assert timing.latest(now) == datetime(2026, 12, 1, 9, 0, 10, tzinfo=UTC)
    assert timing.after(now) == datetime(2026, 12, 1, 9, 0, 20, tzinfo=UTC)
    assert slot_text(timing.after(now)) == "2026-12-01T09:00:20Z"


@pytest.mark.parametrize(
    ("expression", "zone", "problem"),
    [
        ("61 * * * *", "UTC", "not a cron expression: '61 * * * *'"),
        ("0 * * * *", "Europe/Nowhere", "unknown time zone 'Europe/Nowhere'"),
        ("0 * * * *", "", "zone must be an IANA time zone name, got ''"),
    ],
)
def test_a_bad_expression_or_zone_is_kept_as_the_problem(
    expression: str, zone: str, problem: str
) -> None:
    assert Cron(expression, zone).problem == problem
    assert Cron("0 * * * *", "Europe/Berlin").problem is None


@pytest.mark.parametrize("seconds", [0, -1, 1.5, True, "10"])
def test_an_interval_must_be_whole_seconds_from_one(seconds: object) -> None:
    with pytest.raises(ValueError, match="whole number of seconds"):
        Every(seconds)  # type: ignore[arg-type]
