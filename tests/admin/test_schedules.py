"""The admin's Schedules page: read-only, behind the view permission."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from io import StringIO
from zoneinfo import ZoneInfo

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from astral_taskclaim.schedules import cron, periodic, schedules
from tests.admin.data import client_for, staff
from tests.schedules.kit import claimed

pytestmark = pytest.mark.django_db

LIST = reverse("admin:astral_taskclaim_schedulerecord_changelist")


@pytest.fixture
def nightly() -> Iterator[None]:
    """Schedule ``nightly`` declared, with a recorded slot."""
    periodic(cron("30 2 * * *", zone="Europe/Berlin"), name="nightly", task={})(claimed(60))
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO taskclaim.schedule (name, last_slot, outcome) "
            "VALUES ('nightly', '2026-12-01T01:30:00Z', 'coalesced')"
        )
    yield
    schedules.remove("nightly")


def test_the_list_shows_task_expression_zone_slots_and_outcome(nightly: None) -> None:
    page = client_for(staff("viewer", "view_schedulerecord")).get(LIST)
    assert page.status_code == 200
    text = page.content.decode()
    for shown in ("nightly", "tests.schedules.report", "30 2 * * *", "Europe/Berlin", "coalesced"):
        assert shown in text
    assert '<td class="field-enqueued_by">workers</td>' in text
    assert "add/" not in text.split('id="changelist"')[0].split("<h1>")[-1]


def test_the_list_needs_the_view_permission(nightly: None) -> None:
    assert client_for(staff("nobody")).get(LIST).status_code == 403


def row_of(page: str, name: str) -> str:
    """The changelist's table row of schedule ``name``."""
    [row] = [row for row in page.split("<tr")[1:] if re.search(rf">{name}<", row)]
    return row.split("</tr>")[0]


@pytest.fixture
def declared_only() -> Iterator[None]:
    """Schedule ``weekly-digest`` declared, never run (no record)."""
    periodic(cron("30 2 * * 1", zone="America/New_York"), name="weekly-digest", task={})(
        claimed(60)
    )
    yield
    schedules.remove("weekly-digest")


def test_a_declared_schedule_that_never_ran_is_listed_with_its_next_slot_in_its_zone(
    nightly: None, declared_only: None
) -> None:
    zone = ZoneInfo("America/New_York")
    before = datetime.now(UTC)
    page = client_for(staff("viewer", "view_schedulerecord")).get(LIST).content.decode()
    after = datetime.now(UTC)
    row = row_of(page, "weekly-digest")
    for shown in ("tests.schedules.report", "30 2 * * 1", "America/New_York", "workers"):
        assert shown in row
    timing = cron("30 2 * * 1", zone="America/New_York")
    slots = {f"{timing.after(t).astimezone(zone):%Y-%m-%d %H:%M:%S %Z}" for t in (before, after)}
    assert any(slot in row for slot in slots), row
    assert " 02:30:00 E" in row  # the zone's wall clock (EST or EDT)
    assert "/change/" not in row  # no record to show yet
    # A schedule with a record is still listed once, its page linked.
    recorded = row_of(page, "nightly")
    assert "coalesced" in recorded
    assert reverse("admin:astral_taskclaim_schedulerecord_change", args=("nightly",)) in recorded
    assert page.count(">nightly<") == 1


@pytest.mark.parametrize("expression", ["0 0 1 1 * 0 2020", "0 0 31 2 *"])
def test_a_schedule_with_no_slot_to_come_is_listed_with_none(expression: str) -> None:
    # Its years are past, or (E050) no date matches it: croniter finds no
    # next slot, which made the page a 500 and taskclaim_status a traceback.
    periodic(cron(expression), name="over", task={})(claimed(60))
    try:
        page = client_for(staff("viewer", "view_schedulerecord")).get(LIST)
        assert page.status_code == 200
        assert expression in row_of(page.content.decode(), "over")
        out = StringIO()
        call_command("taskclaim_status", "--json", stdout=out)
        [row] = [row for row in json.loads(out.getvalue())["schedules"] if row["name"] == "over"]
        assert row["next_slot"] is None
    finally:
        schedules.remove("over")
