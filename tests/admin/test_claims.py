"""The claims admin through the Django test client, on the real tables:
listing, key search, state filter, permissions, CSRF, release, estimated
counts and the index use of the search query the page runs."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.utils import quote
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.admin.data import add_claims, claim_keys, client_for, staff
from tests.claimkit import insert_claim

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:astral_taskclaim_claim_changelist")

# Keys a naive LIKE or an unescaped pattern gets wrong.
TRICKY = ["a%b", "a_b", "axb", "a\\b", "a'b", 'a"b', "a b", "ab", "a", "b%", "é/x", "😀"]


def listed_keys(html: str) -> list[str]:
    """The keys in a changelist page, in order (as shown: HTML-escaped)."""
    return re.findall(r'<th class="field-key"><a href="[^"]*">([^<]*)</a>', html)


def escaped(key: str) -> str:
    from django.utils.html import escape

    return escape(key)


def test_changelist_shows_state_relative_expiry_and_token(admin_client):
    token = insert_claim("project:42", seconds=245)
    insert_claim("project:7", seconds=-3 * 3600)

    html = admin_client.get(CHANGELIST).content.decode()

    assert listed_keys(html) == ["project:7", "project:42"]  # ordered by expiry
    row_42 = html[html.index(">project:42<") :].split("</tr>")[0]
    assert "active" in row_42
    assert "in 4 min" in row_42
    assert token in row_42
    row_7 = html[html.index(">project:7<") :].split("</tr>")[0]
    assert "expired" in row_7
    assert "3 h ago" in row_7


def test_state_filter(admin_client):
    insert_claim("live", seconds=60)
    insert_claim("gone", seconds=-60)

    active = admin_client.get(CHANGELIST, {"state": "active"}).content.decode()
    expired = admin_client.get(CHANGELIST, {"state": "expired"}).content.decode()

    assert listed_keys(active) == ["live"]
    assert listed_keys(expired) == ["gone"]


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ("a%", ["a%b"]),
        ("a_", ["a_b"]),
        ("a\\", ["a\\b"]),
        ("a'", ["a'b"]),
        ('a"', ['a"b']),
        ("a ", ["a b"]),
        ("ab", ["ab"]),
        ("b%", ["b%"]),
        ("é/", ["é/x"]),
        ("😀", ["😀"]),
        ("%", []),
        ("_", []),
        ("A", []),
    ],
)
def test_search_matches_exact_and_prefix_literally(admin_client, term, expected):
    for key in TRICKY:
        insert_claim(key, seconds=60)

    html = admin_client.get(CHANGELIST, {"q": term}).content.decode()

    assert sorted(listed_keys(html)) == sorted(escaped(key) for key in expected)


def test_search_for_a_key_lists_it_and_longer_keys(admin_client):
    for key in TRICKY:
        insert_claim(key, seconds=60)

    html = admin_client.get(CHANGELIST, {"q": "a"}).content.decode()

    expected = [key for key in TRICKY if key.startswith("a")]
    assert sorted(listed_keys(html)) == sorted(escaped(key) for key in expected)


def test_search_with_nul_is_refused_with_a_message(admin_client):
    insert_claim("a", seconds=60)

    response = admin_client.get(CHANGELIST, {"q": "a\x00"})

    assert response.status_code == 200
    assert "Null characters are not allowed" in response.content.decode()


def test_search_query_uses_the_primary_key_index(admin_client):
    add_claims(20_000, prefix="project:")

    with CaptureQueriesContext(connection) as queries:
        response = admin_client.get(CHANGELIST, {"q": "project:1234"})
    assert response.status_code == 200
    assert len(listed_keys(response.content.decode())) == 11  # 1234 and 12340..12349

    searches = [q["sql"] for q in queries if '"key" >= ' in q["sql"] and "LIMIT" in q["sql"]]
    assert searches, "the changelist ran no key-range query"
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + searches[-1])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "claim_pkey" in plan
    assert "Seq Scan" not in plan


def test_large_table_is_never_fully_counted(admin_client):
    add_claims(20_000)

    with CaptureQueriesContext(connection) as queries:
        html = admin_client.get(CHANGELIST).content.decode()

    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"].upper()]
    assert counts
    assert all("LIMIT 10001" in sql for sql in counts), counts
    assert re.search(r"about \d+ claims", html)
    assert len(listed_keys(html)) == 100


def test_small_table_count_is_exact(admin_client):
    for n in range(3):
        insert_claim(f"k{n}", seconds=60)

    html = admin_client.get(CHANGELIST).content.decode()

    assert "3 claims" in html
    assert "about" not in html.split('class="paginator"')[1]


def test_view_only_staff_sees_no_actions_and_cannot_release(client):
    insert_claim("held", seconds=600)
    insert_claim("old", seconds=-600)
    viewer = client_for(staff("viewer", "view_claim"))

    page = viewer.get(CHANGELIST)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="action"' not in html
    assert "taskclaim-delete-expired" not in html

    posted = viewer.post(
        CHANGELIST, {"action": "release_claims", "_selected_action": ["held"], "index": "0"}
    )
    assert posted.status_code in (200, 302)
    assert claim_keys() == {"held", "old"}

    url = reverse("admin:astral_taskclaim_claim_delete_expired")
    assert viewer.get(url).status_code == 403
    assert viewer.post(url).status_code == 403
    assert claim_keys() == {"held", "old"}


def test_staff_without_view_permission_is_refused(client):
    stranger = client_for(staff("stranger"))

    assert stranger.get(CHANGELIST).status_code == 403
    assert stranger.get(reverse("admin:astral_taskclaim_overview")).status_code == 403


def test_release_selected_claims_frees_only_those_keys(client):
    for key in ("one", "two", "three"):
        insert_claim(key, seconds=600)
    releaser = client_for(staff("releaser", "view_claim", "delete_claim"))
    assert 'value="release_claims"' in releaser.get(CHANGELIST).content.decode()

    response = releaser.post(
        CHANGELIST,
        {"action": "release_claims", "_selected_action": ["one", "three"], "index": "0"},
        follow=True,
    )

    assert claim_keys() == {"two"}
    assert "Released 2 claims." in response.content.decode()


def test_release_across_a_search_releases_every_match(admin_client):
    for key in ("job:1", "job:2", "other"):
        insert_claim(key, seconds=600)

    admin_client.post(
        f"{CHANGELIST}?q=job:",
        {
            "action": "release_claims",
            "_selected_action": ["job:1"],
            "select_across": "1",
            "index": "0",
        },
    )

    assert claim_keys() == {"other"}


def test_actions_need_the_csrf_token():
    insert_claim("guarded", seconds=600)
    user = staff("csrf", "view_claim", "delete_claim")
    guarded = client_for(user, enforce_csrf_checks=True)
    data = {"action": "release_claims", "_selected_action": ["guarded"], "index": "0"}

    assert guarded.post(CHANGELIST, data).status_code == 403
    assert claim_keys() == {"guarded"}

    page = guarded.get(CHANGELIST).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token is not None
    accepted = guarded.post(CHANGELIST, {**data, "csrfmiddlewaretoken": token.group(1)})
    assert accepted.status_code == 302
    assert claim_keys() == set()


def test_detail_is_read_only_and_escaped(admin_client):
    key = "<b>x</b>/50%_'\\"
    insert_claim(key, seconds=130)
    url = reverse("admin:astral_taskclaim_claim_change", args=(quote(key),))

    page = admin_client.get(url)

    html = page.content.decode()
    assert page.status_code == 200
    assert escaped(key) in html
    assert "<b>x</b>" not in html
    assert 'name="_save"' not in html
    assert "in 2 min" in html
    assert admin_client.post(url, {"key": "changed"}).status_code == 403
    assert claim_keys() == {key}


def test_no_add(admin_client):
    assert admin_client.get(reverse("admin:astral_taskclaim_claim_add")).status_code == 403
    add_url = reverse("admin:astral_taskclaim_claim_add")
    assert add_url not in admin_client.get(CHANGELIST).content.decode()


def test_result_count_shows_only_when_searching_or_filtering(admin_client):
    add_claims(20_000, prefix="job:")

    unfiltered = admin_client.get(CHANGELIST).content.decode()
    exact = admin_client.get(CHANGELIST, {"q": "job:123"}).content.decode()
    estimated = admin_client.get(CHANGELIST, {"q": "job:"}).content.decode()

    assert " result" not in unfiltered.split('id="toolbar"')[1].split("</form>")[0]
    assert "11 results" in exact
    assert re.search(r"about \d+ results", estimated)


@pytest.mark.parametrize("view", ["change", "delete", "history"])
def test_a_key_with_nul_is_not_found(admin_client, view):
    # The URL's %00 reaches the view as NUL, which no text key can hold.
    url = reverse(f"admin:astral_taskclaim_claim_{view}", args=("x\x00",))

    assert "/x%00/" in url
    assert admin_client.get(url).status_code == 404
    assert admin_client.get(f"{CHANGELIST}%00/{view}/").status_code == 404
    assert admin_client.post(url, {"post": "yes"}).status_code == 404
