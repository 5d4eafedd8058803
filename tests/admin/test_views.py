"""The overview page and "delete expired claims", through the test client."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from astral_taskclaim.admin.views import _claim_timeline, _message_timeline
from tests.admin.data import (
    add_claims,
    add_message,
    claim_keys,
    client_for,
    envelope,
    staff,
)
from tests.claimkit import insert_claim

pytestmark = pytest.mark.django_db

OVERVIEW = reverse("admin:astral_taskclaim_overview")
DELETE_EXPIRED = reverse("admin:astral_taskclaim_claim_delete_expired")
APP_INDEX = reverse("admin:app_list", args=("astral_taskclaim",))


def bars(html: str, series: str) -> list[int]:
    """The counts drawn by ``series``' bars, bucket by bucket."""
    pattern = rf'<rect class="taskclaim-bar taskclaim-{series}"[^>]*data-count="(\d+)"'
    return [int(n) for n in re.findall(pattern, html)]


def table_counts(html: str, table_id: str) -> list[str]:
    table = html[html.index(f'id="{table_id}"') :].split("</table>")[0]
    found = re.findall(r'class="taskclaim-number">(?:<a [^>]*>)?(?:<span [^>]*>)?([^<]+)<', table)
    return [text.strip() for text in found]


def test_timelines_bucket_by_half_hour():
    insert_claim("soon", seconds=10 * 60)
    insert_claim("later", seconds=100 * 60)
    insert_claim("past", seconds=-60)
    insert_claim("beyond", seconds=7 * 3600)
    add_message("q", envelope("a", {}), visible_in=40 * 60)
    add_message("q", envelope("b", {}), visible_in=40 * 60, leased=True)
    add_message("q", envelope("c", {}), visible_in=-60)

    claims = _claim_timeline("default")
    due = _message_timeline("default", ["q"])

    assert claims == [1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]
    assert due == [0, 1] + [0] * 10
    assert _message_timeline("default", []) == [0] * 12


def test_overview_counts_and_chart(admin_client):
    insert_claim("a", seconds=10 * 60)
    insert_claim("b", seconds=100 * 60)
    insert_claim("c", seconds=-60)
    add_message("mail", envelope("a", {}), visible_in=-1)
    add_message("mail", envelope("b", {}), visible_in=40 * 60)
    add_message("refresh", envelope("c", {}), visible_in=60, leased=True)

    page = admin_client.get(OVERVIEW)

    html = page.content.decode()
    assert page.status_code == 200
    assert table_counts(html, "taskclaim-claim-counts") == ["claims", "2", "1"]
    assert table_counts(html, "taskclaim-message-counts") == [
        "ready", "delayed", "leased", "1", "1", "0", "0", "0", "1",
    ]  # fmt: skip
    assert '<svg id="taskclaim-chart"' in html
    assert bars(html, "claims") == [1, 0, 0, 1] + [0] * 8
    assert bars(html, "messages") == [0, 1] + [0] * 10
    assert "<script" not in html.split('id="content"')[1].split('id="footer"')[0]
    assert "?queue=refresh&amp;state=leased" in html


def test_overview_without_message_permission_shows_claims_only(client):
    add_message("mail", envelope("a", {}), visible_in=60)
    viewer = client_for(staff("claimsonly", "view_claim"))

    html = viewer.get(OVERVIEW).content.decode()

    assert "taskclaim-claim-counts" in html
    assert "taskclaim-message-counts" not in html
    assert bars(html, "messages") == []


def test_app_index_links_the_overview(client):
    viewer = client_for(staff("indexviewer", "view_claim"))
    html = viewer.get(APP_INDEX).content.decode()
    assert f'href="{OVERVIEW}"' in html

    other = client_for(staff("messagesonly", "view_queuemessage"))
    assert f'href="{OVERVIEW}"' not in other.get(APP_INDEX).content.decode()


def test_changelist_links_the_overview(admin_client):
    html = admin_client.get(reverse("admin:astral_taskclaim_claim_changelist")).content.decode()

    assert f'href="{OVERVIEW}"' in html
    assert f'href="{DELETE_EXPIRED}"' in html


def test_delete_expired_confirms_then_deletes_only_expired(client):
    insert_claim("old", seconds=-60)
    insert_claim("older", seconds=-3600)
    insert_claim("live", seconds=600)
    deleter = client_for(staff("expirer", "view_claim", "delete_claim"))

    asked = deleter.get(DELETE_EXPIRED)
    assert asked.status_code == 200
    assert "2 claims have expired." in asked.content.decode()
    assert claim_keys() == {"old", "older", "live"}

    done = deleter.post(DELETE_EXPIRED, follow=True)
    assert claim_keys() == {"live"}
    assert "Deleted 2 expired claims." in done.content.decode()


def test_delete_expired_needs_the_csrf_token():
    insert_claim("old", seconds=-60)
    guarded = client_for(staff("csrf2", "view_claim", "delete_claim"), enforce_csrf_checks=True)

    assert guarded.post(DELETE_EXPIRED).status_code == 403
    assert claim_keys() == {"old"}

    page = guarded.get(DELETE_EXPIRED).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token is not None
    assert guarded.post(DELETE_EXPIRED, {"csrfmiddlewaretoken": token.group(1)}).status_code == 302
    assert claim_keys() == set()


def test_overview_estimates_large_counts(admin_client):
    add_claims(20_000)

    html = admin_client.get(OVERVIEW).content.decode()

    active = table_counts(html, "taskclaim-claim-counts")[1]
    assert active.startswith("about ")
    assert 15_000 <= int(active.removeprefix("about ")) <= 25_000
    assert table_counts(html, "taskclaim-claim-counts")[2] == "0"
