"""The follow-up runs admin (trailing triggers): listing, search, read-only,
and deleting a pending one needs the delete permission."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.urls import reverse

from tests.admin.data import client_for, staff

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:astral_taskclaim_followup_changelist")


def add_follow_up(key: str, *, taken: bool = False) -> str:
    token = str(uuid.uuid4())
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO taskclaim.follow_up
               (token, key, task, window_seconds, created_at, updated_at, taken_at)
               VALUES (%s, %s, '{"id": 42}', 60, now(), now(),
                       CASE WHEN %s THEN now() END)""",
            [token, key, taken],
        )
    return token


def test_the_list_shows_pending_and_taken_follow_ups_and_searches_keys(admin_client):
    pending = add_follow_up("project:42")
    add_follow_up("project:7", taken=True)
    html = admin_client.get(CHANGELIST).content.decode()
    assert pending in html
    assert "project:7" in html
    assert 'alt="True"' in html
    assert 'alt="False"' in html
    found = admin_client.get(CHANGELIST, {"q": "project:4"}).content.decode()
    assert "project:42" in found
    assert "project:7" not in found
    assert admin_client.get(CHANGELIST, {"q": "a\x00b"}).status_code == 200


def test_a_follow_up_is_read_only_and_deleting_one_needs_the_permission():
    token = add_follow_up("project:42")
    change = reverse("admin:astral_taskclaim_followup_change", args=[token])
    delete = reverse("admin:astral_taskclaim_followup_delete", args=[token])
    viewer = client_for(staff("viewer", "view_followup"))
    page = viewer.get(change).content.decode()
    assert '{"id": 42}' in page or "{&quot;id&quot;: 42}" in page
    assert 'name="_save"' not in page
    assert viewer.post(delete, {"post": "yes"}).status_code == 403
    remover = client_for(staff("remover", "view_followup", "delete_followup"))
    assert remover.post(delete, {"post": "yes"}).status_code == 302
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM taskclaim.follow_up")
        assert cursor.fetchone() == (0,)
