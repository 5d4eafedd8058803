"""Slots of cron expressions in a time zone and of fixed intervals, across
daylight-saving changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from astral_taskclaim.schedules import Every
from astral_taskclaim.schedules.timing import Cron, slot_text
from tests.schedules.kit import MINUTE_61

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
        ("61 * * * *", "UTC", f"not a cron expression: '61 * * * *': {MINUTE_61}"),
        ("0 * * * *", "Europe/Nowhere", "unknown time zone 'Europe/Nowhere'"),
        ("0 * * * *", "", "zone must be an IANA time zone name, got ''"),
    ],
)
def test_a_bad_expression_or_zone_is_kept_as_the_problem(
    expression: str, zone: str, problem: str
) -> None:
    assert Cron(expression, zone).problem == problem
    assert Cron("0 * * * *", "Europe/Berlin").problem is None


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("0 30 2 * * *", "its hour field is '30' (hour: 0-23)"),
        ("0 0 32 * *", "its day of month field is '32' (day of month: 1-31 or L)"),
        ("0 0 * 13 *", "its month field is '13' (month: 1-12 or jan-dec)"),
        ("0 0 * * 8", "its day of week field is '8' (day of week: 0-7 or sun-sat)"),
        ("0 0 * * * 60", "its second field is '60' (second: 0-59)"),
        ("0 24 * * * x", "its hour field is '24' (hour: 0-23); its second field is 'x'"),
        ("* * * *", "it has 4 fields"),
        ("", "it has 0 fields"),
    ],
)
def test_a_refused_expression_names_each_wrong_field_and_the_order(
    expression: str, says: str
) -> None:
    problem = Cron(expression).problem
    assert problem is not None
    assert problem.startswith(f"not a cron expression: {expression!r}: {says}")
    assert "five fields, minute hour day-of-month month day-of-week, with an optional " in problem
    assert "sixth for seconds at the end" in problem


@pytest.mark.parametrize("expression", ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *"])
def test_an_expression_no_date_matches_is_refused(expression: str) -> None:
    assert Cron(expression).problem == (
        f"{expression!r} never fires: no date matches its day of month, month and "
        "day of week together"
    )
    assert Cron("0 0 29 2 *").problem is None  # every leap year
    assert Cron("0 0 1 1 * 0 2020").problem is None  # it fired: past years are not refused


@pytest.mark.parametrize(
    ("quartz", "croniter_order"),
    [("0 30 2 * * *", "30 2 * * * 0"), ("0 30 2 * * ? 2030", "30 2 * * ? 0 2030")],
)
def test_a_quartz_expression_is_refused_with_its_croniter_order(
    quartz: str, croniter_order: str
) -> None:
    problem = Cron(quartz).problem
    assert problem is not None
    assert problem.endswith(
        f"; read seconds first (Quartz order) it is valid: write it {croniter_order!r}"
    )
    assert Cron(croniter_order).problem is None
    assert "Quartz order) it is valid" not in (Cron("61 * * * *").problem or "")


@pytest.mark.parametrize(
    ("expression", "per_minute"),
    [("*/5 * * * *", 1), ("*/5 * * * * *", 60), ("0 0 * * * 0,30", 2), ("0 0 * * * 7", 1)],
)
def test_a_seconds_field_says_how_often_a_minute_it_fires(expression: str, per_minute: int) -> None:
    timing = Cron(expression)
    assert timing.per_minute == per_minute
    start = datetime(2026, 1, 1, tzinfo=UTC) - timedelta(microseconds=1)
    assert len(slots_between(timing, start, start + timedelta(minutes=1))) == per_minute


@pytest.mark.parametrize("seconds", [0, -1, 1.5, True, "10"])
def test_an_interval_must_be_whole_seconds_from_one(seconds: object) -> None:
    with pytest.raises(ValueError, match="whole number of seconds"):
        Every(seconds)  # type: ignore[arg-type]
