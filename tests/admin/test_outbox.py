"""The outbox-row admin through the test client: rows set aside listed with
their reason, and the retry and delete actions behind their permissions."""

from __future__ import annotations

import pytest
from django.db import connection
from django.urls import reverse

from tests.admin.data import client_for, envelope, staff

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:astral_taskclaim_outboxrow_changelist")
REASON = "HTTP 400: 10204 Message size out of bounds"


def add_row(key: str, *, dead: bool = False, waiting: bool = False) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO taskclaim.outbox (queue, body, attempts, last_error, dead_at,
                                             available_at)
               VALUES ('remote', %s, %s, %s, CASE WHEN %s THEN now() END,
                       now() + CASE WHEN %s THEN interval '1 hour' ELSE interval '0' END)
               RETURNING id""",
            [envelope(key, {"n": 1}), int(dead), REASON if dead else None, dead, waiting],
        )
        return int(cursor.fetchone()[0])


def states() -> dict[int, tuple[bool, bool]]:
    """Each row: (set aside, waiting)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, dead_at IS NOT NULL, available_at > statement_timestamp() "
            "FROM taskclaim.outbox"
        )
        return {id_: (dead, waiting) for id_, dead, waiting in cursor.fetchall()}


def test_rows_set_aside_are_listed_with_their_reason_and_state(admin_client) -> None:
    dead, waiting, due = add_row("a", dead=True), add_row("b", waiting=True), add_row("c")
    html = admin_client.get(CHANGELIST, {"state": "dead"}).content.decode()
    assert f'value="{dead}"' in html
    assert REASON in html
    assert ">set aside<" in html
    assert f'value="{waiting}"' not in html
    html = admin_client.get(CHANGELIST).content.decode()
    assert ">waiting<" in html
    assert ">due<" in html
    page = admin_client.get(reverse("admin:astral_taskclaim_outboxrow_change", args=(due,)))
    assert page.status_code == 200
    assert "&quot;key&quot;:&quot;c&quot;" in page.content.decode()


def test_retry_makes_rows_set_aside_due_and_needs_change_permission() -> None:
    dead = add_row("a", dead=True)
    post = {"action": "retry_rows", "_selected_action": [dead]}
    viewer = client_for(staff("viewer", "view_outboxrow"))
    assert "retry_rows" not in viewer.get(CHANGELIST).content.decode()
    viewer.post(CHANGELIST, post)
    assert states()[dead] == (True, False)
    changer = client_for(staff("changer", "view_outboxrow", "change_outboxrow"))
    response = changer.post(CHANGELIST, post, follow=True)
    assert "1 row will be sent again." in response.content.decode()
    assert states()[dead] == (False, False)


def test_delete_needs_delete_permission() -> None:
    dead = add_row("a", dead=True)
    post = {"action": "delete_rows", "_selected_action": [dead]}
    client_for(staff("viewer", "view_outboxrow", "change_outboxrow")).post(CHANGELIST, post)
    assert dead in states()
    deleter = client_for(staff("deleter", "view_outboxrow", "delete_outboxrow"))
    response = deleter.post(CHANGELIST, post, follow=True)
    assert "Deleted 1 row." in response.content.decode()
    assert dead not in states()
