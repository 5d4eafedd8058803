"""The queue-message admin through the test client: listing, filters,
the escaped task JSON, "run now" and delete, and their permissions."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.utils import quote
from django.db import connection
from django.urls import reverse

from astral_taskclaim.admin.messages import queue_names
from tests.admin.data import (
    add_message,
    client_for,
    envelope,
    seconds_until_visible,
    staff,
)
from tests.claimkit import raw_connection

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:astral_taskclaim_queuemessage_changelist")


def listed_ids(html: str) -> list[int]:
    """The message ids in a changelist page, in order."""
    return [int(n) for n in re.findall(r'<th class="field-id"><a href="[^"]*">(\d+)</a>', html)]


def row(html: str, message_id: int) -> str:
    start = html.index(f'value="{message_id}"')
    return html[start : html.index("</tr>", start)]


@pytest.fixture
def three_states():
    """A ready, a delayed (2 min) and a leased message, in two queues."""
    return {
        "ready": add_message("mail", envelope("user:1", {"to": "a"}), visible_in=-5, attempts=1),
        "delayed": add_message("mail", envelope("user:2", {"to": "b"}), visible_in=125),
        "leased": add_message("refresh", envelope("project:42", [1]), visible_in=60, leased=True),
    }


def test_changelist_shows_queue_key_attempts_and_due(admin_client, three_states):
    html = admin_client.get(CHANGELIST).content.decode()

    assert listed_ids(html) == [
        three_states["ready"],
        three_states["leased"],
        three_states["delayed"],
    ]
    ready = row(html, three_states["ready"])
    assert "mail" in ready
    assert "user:1" in ready
    assert '<td class="field-attempts">1</td>' in ready
    assert ">ready<" in ready
    assert "due in 2 min" in row(html, three_states["delayed"])
    leased = row(html, three_states["leased"])
    assert ">leased<" in leased
    assert "project:42" in leased
    assert reverse("admin:astral_taskclaim_claim_change", args=(quote("project:42"),)) in leased


@pytest.mark.parametrize("state", ["ready", "delayed", "leased"])
def test_state_filter(admin_client, three_states, state):
    html = admin_client.get(CHANGELIST, {"state": state}).content.decode()

    assert listed_ids(html) == [three_states[state]]


def test_queue_filter_lists_the_queues_that_have_messages(admin_client, three_states):
    html = admin_client.get(CHANGELIST, {"queue": "refresh"}).content.decode()

    assert listed_ids(html) == [three_states["leased"]]
    assert "?queue=mail" in html
    assert queue_names("default") == ["mail", "refresh"]


def test_detail_shows_the_task_pretty_printed_and_escaped(admin_client):
    task = {"html": "<script>alert('x')</script>", "n": [1, 2]}
    message_id = add_message("mail", envelope("user:<1>", task))

    page = admin_client.get(
        reverse("admin:astral_taskclaim_queuemessage_change", args=(message_id,))
    )

    html = page.content.decode()
    assert page.status_code == 200
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert '<pre class="taskclaim-json">{\n  &quot;html&quot;' in html
    assert "user:&lt;1&gt;" in html
    assert 'name="_save"' not in html


def test_detail_of_a_body_without_envelope_shows_it_whole(admin_client):
    message_id = add_message("mail", '["not", "an", "envelope"]')

    html = admin_client.get(
        reverse("admin:astral_taskclaim_queuemessage_change", args=(message_id,))
    ).content.decode()

    assert "[\n  &quot;not&quot;," in html


def test_run_now_makes_delayed_messages_visible_and_leaves_leased_ones(admin_client, three_states):
    response = admin_client.post(
        CHANGELIST,
        {
            "action": "run_now",
            "_selected_action": [str(pk) for pk in three_states.values()],
            "index": "0",
        },
        follow=True,
    )

    assert seconds_until_visible(three_states["delayed"]) <= 0
    assert seconds_until_visible(three_states["leased"]) > 0
    assert "1 message will run now. 2 were leased or already ready" in response.content.decode()


def test_view_only_staff_cannot_run_or_delete(client, three_states):
    viewer = client_for(staff("msgviewer", "view_queuemessage"))

    html = viewer.get(CHANGELIST).content.decode()
    assert 'name="action"' not in html
    for action in ("run_now", "delete_messages"):
        viewer.post(
            CHANGELIST,
            {
                "action": action,
                "_selected_action": [str(three_states["delayed"])],
                "index": "0",
                "post": "yes",
            },
        )
    assert seconds_until_visible(three_states["delayed"]) > 60


def test_delete_asks_first_then_deletes(client, three_states):
    deleter = client_for(staff("msgdeleter", "view_queuemessage", "delete_queuemessage"))
    assert 'value="run_now"' not in deleter.get(CHANGELIST).content.decode()
    selected = {"action": "delete_messages", "_selected_action": [str(three_states["ready"])]}

    asked = deleter.post(CHANGELIST, {**selected, "index": "0"})
    assert asked.status_code == 200
    assert "Delete 1 message?" in asked.content.decode()
    assert seconds_until_visible(three_states["ready"]) is not None

    done = deleter.post(CHANGELIST, {**selected, "select_across": "0", "post": "yes"}, follow=True)
    assert "Deleted 1 message." in done.content.decode()
    assert seconds_until_visible(three_states["ready"]) is None
    assert seconds_until_visible(three_states["delayed"]) is not None


def test_delete_across_a_filter(admin_client, three_states):
    admin_client.post(
        f"{CHANGELIST}?queue=mail",
        {
            "action": "delete_messages",
            "_selected_action": [str(three_states["ready"])],
            "select_across": "1",
            "post": "yes",
        },
    )

    assert seconds_until_visible(three_states["ready"]) is None
    assert seconds_until_visible(three_states["delayed"]) is None
    assert seconds_until_visible(three_states["leased"]) is not None


def test_no_add_or_edit(admin_client, three_states):
    change = reverse("admin:astral_taskclaim_queuemessage_change", args=(three_states["ready"],))

    assert admin_client.get(reverse("admin:astral_taskclaim_queuemessage_add")).status_code == 403
    assert admin_client.post(change, {"attempts": "9"}).status_code == 403


@pytest.mark.django_db(transaction=True)
def test_run_now_wakes_the_queue_consumers(admin_user):
    message_id = add_message("wake", envelope("k", {}), visible_in=600)
    try:
        with raw_connection() as listener:
            listener.execute('LISTEN "taskclaim.wake"')
            client_for(admin_user).post(
                CHANGELIST,
                {"action": "run_now", "_selected_action": [str(message_id)], "index": "0"},
            )
            # The notification is sent at commit; wait for it, not for time.
            heard = next(listener.notifies(timeout=30, stop_after=1), None)
        assert heard is not None
        assert heard.channel == "taskclaim.wake"
        assert seconds_until_visible(message_id) <= 0
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM taskclaim.message WHERE queue = 'wake'")


DEEP_BODY = "[" * 10_000 + "]" * 10_000  # valid JSON to PostgreSQL, too deep for Python


def test_a_body_too_deep_to_decode_is_listed_shown_raw_and_deletable(admin_client):
    deep = add_message("deep", DEEP_BODY)
    detail = reverse("admin:astral_taskclaim_queuemessage_change", args=(deep,))

    listed = admin_client.get(CHANGELIST)
    shown = admin_client.get(detail)

    assert listed.status_code == 200
    assert listed_ids(listed.content.decode()) == [deep]
    assert shown.status_code == 200
    html = shown.content.decode()
    assert "[" * 5_000 in html  # the raw text, cut
    assert "[" * 10_001 not in html
    assert "Cut after 10000 of 20000 characters." in html
    deleted = admin_client.post(
        CHANGELIST, {"action": "delete_messages", "_selected_action": [deep], "post": "yes"}
    )
    assert deleted.status_code == 302
    assert seconds_until_visible(deep) is None
