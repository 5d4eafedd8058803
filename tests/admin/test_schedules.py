"""The admin's Schedules page: read-only, behind the view permission."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
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
