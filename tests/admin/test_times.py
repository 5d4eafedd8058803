"""The admin pages render whatever time a row holds: 'infinity', '-infinity'
and years Python's dates cannot hold (a key pinned by hand, a corrupt or
hand-edited message), in any time zone, and such rows stay sortable,
filterable, releasable and deletable."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.utils import quote
from django.db import connection
from django.test import Client, override_settings
from django.urls import reverse

from astral_taskclaim.admin.times import relative_or_never
from tests.admin.data import add_message, claim_keys, envelope, seconds_until_visible
from tests.claimkit import insert_claim

pytestmark = pytest.mark.django_db

CLAIMS = reverse("admin:astral_taskclaim_claim_changelist")
MESSAGES = reverse("admin:astral_taskclaim_queuemessage_changelist")

# Values a timestamptz admits that Python's datetime cannot load, or cannot
# convert to every time zone.
ODD_TIMES = {
    "infinity": "infinity",
    "-infinity": "-infinity",
    "far": "294276-12-31 23:59:59.999999+00",
    "bc": "4713-01-01 00:00:00+00 BC",
    "edge": "9999-12-31 23:00:00+00",
}


def set_expiry(key: str, value: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("UPDATE taskclaim.claim SET expires_at = %s WHERE key = %s", [value, key])


def set_message_times(message_id: int, value: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """UPDATE taskclaim.message SET visible_at = %(v)s, enqueued_at = %(v)s,
                                            leased_at = %(v)s
               WHERE id = %(id)s""",
            {"v": value, "id": message_id},
        )


def listed_keys(html: str) -> list[str]:
    return re.findall(r'<th class="field-key"><a href="[^"]*">([^<]*)</a>', html)


def claim_row(html: str, key: str) -> str:
    return html[html.index(f">{key}<") :].split("</tr>")[0]


@override_settings(TIME_ZONE="Pacific/Kiritimati")  # UTC+14: year 9999 overflows
def test_claims_with_any_expiry_are_listed_with_their_state(admin_client: Client) -> None:
    for name, value in ODD_TIMES.items():
        insert_claim(name, seconds=60)
        set_expiry(name, value)
    insert_claim("normal", seconds=245)

    page = admin_client.get(CLAIMS)

    html = page.content.decode()
    assert page.status_code == 200
    assert listed_keys(html) == ["-infinity", "bc", "normal", "edge", "far", "infinity"]
    pinned = claim_row(html, "infinity")
    assert ">active<" in pinned
    assert ">infinity<" in pinned
    assert ">never<" in pinned
    assert ">expired<" in claim_row(html, "-infinity")
    assert ">expired<" in claim_row(html, "bc")
    assert ">active<" in claim_row(html, "far")
    assert "294276-12-31" in claim_row(html, "far")
    assert "in 4 min" in claim_row(html, "normal")
    descending = admin_client.get(CLAIMS, {"o": "-3"}).content.decode()
    assert listed_keys(descending) == ["infinity", "far", "edge", "normal", "bc", "-infinity"]
    active = admin_client.get(CLAIMS, {"state": "active"}).content.decode()
    assert listed_keys(active) == ["normal", "edge", "far", "infinity"]


@pytest.mark.parametrize("name", ODD_TIMES)
def test_a_claim_with_any_expiry_has_a_detail_page_and_can_be_released(
    admin_client: Client, name: str
) -> None:
    insert_claim(name, seconds=60)
    set_expiry(name, ODD_TIMES[name])
    detail = reverse("admin:astral_taskclaim_claim_change", args=(quote(name),))
    history = reverse("admin:astral_taskclaim_claim_history", args=(quote(name),))

    assert admin_client.get(detail).status_code == 200
    assert admin_client.get(history).status_code == 200
    released = admin_client.post(
        CLAIMS, {"action": "release_claims", "_selected_action": [name]}, follow=True
    )
    assert released.status_code == 200
    assert claim_keys() == set()


@override_settings(TIME_ZONE="Pacific/Kiritimati")
def test_messages_with_any_times_are_listed_shown_and_deletable(admin_client: Client) -> None:
    ids = {}
    for name, value in ODD_TIMES.items():
        ids[name] = add_message("odd", envelope(name, {}))
        set_message_times(ids[name], value)
    normal = add_message("odd", envelope("normal", {}), visible_in=125)
    everything = {**ids, "normal": normal}

    page = admin_client.get(MESSAGES)

    html = page.content.decode()
    assert page.status_code == 200
    never = html[html.index(f'value="{ids["infinity"]}"') :].split("</tr>")[0]
    assert ">never<" in never
    assert "due in 2 min" in html
    for state, expected in [
        ("ready", {"-infinity", "bc"}),
        ("delayed", {"normal", "far", "edge", "infinity"}),
    ]:
        filtered = admin_client.get(MESSAGES, {"state": state}).content.decode()
        assert {name for name, id_ in everything.items() if f'value="{id_}"' in filtered} == (
            expected
        )
    for name, id_ in ids.items():
        detail = reverse("admin:astral_taskclaim_queuemessage_change", args=(id_,))
        shown = admin_client.get(detail)
        assert shown.status_code == 200, name
        assert ODD_TIMES[name].split(" ")[0] in shown.content.decode()
    deleted = admin_client.post(
        MESSAGES,
        {"action": "delete_messages", "_selected_action": list(ids.values()), "post": "yes"},
    )
    assert deleted.status_code == 302
    assert all(seconds_until_visible(id_) is None for id_ in ids.values())
    assert seconds_until_visible(normal) is not None


def test_run_now_brings_a_message_back_from_never(admin_client: Client) -> None:
    parked = add_message("odd", envelope("k", {}))
    set_message_times(parked, "infinity")

    admin_client.post(MESSAGES, {"action": "run_now", "_selected_action": [parked]})

    due_in = seconds_until_visible(parked)
    assert due_in is not None
    assert due_in <= 0


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(float("inf"), "never"), (float("-inf"), "long ago"), (245, "in 4 min")],
)
def test_relative_or_never(seconds: float, words: str) -> None:
    assert relative_or_never(seconds) == words


def test_the_overview_counts_rows_with_any_times(admin_client: Client) -> None:
    for name, value in ODD_TIMES.items():
        insert_claim(name, seconds=60)
        set_expiry(name, value)
        set_message_times(add_message("odd", envelope(name, {})), value)

    page = admin_client.get(reverse("admin:astral_taskclaim_overview"))

    assert page.status_code == 200
    assert page.context["active"].value == 3
    assert page.context["expired"].value == 2
