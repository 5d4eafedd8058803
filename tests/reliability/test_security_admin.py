"""The admin's doors: every view and action of the claim and message admins
checks its Django permission (a user lacking it gets a 403, or the action
is simply not carried out, and nothing changes); anonymous and non-staff
users are sent to the login page; every POST needs the CSRF token; hostile
keys and task JSON are shown escaped on every page that shows them."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from tests.admin.data import (
    add_message,
    claim_keys,
    client_for,
    envelope,
    seconds_until_visible,
    staff,
)
from tests.claimkit import insert_claim

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    """Test users' passwords hash fast; the hasher is not what is tested."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


CLAIMS = reverse("admin:astral_taskclaim_claim_changelist")
MESSAGES = reverse("admin:astral_taskclaim_queuemessage_changelist")
CLAIM_PERMS = ("view_claim", "change_claim", "delete_claim", "add_claim")
MESSAGE_PERMS = (
    "view_queuemessage",
    "change_queuemessage",
    "delete_queuemessage",
    "add_queuemessage",
)
HOSTILE_KEY = '<script>alert("key")</script>'
HOSTILE_TASK = {
    "note": "</pre><script>alert('task')</script>",
    "img": "<img src=x onerror=alert(1)>",
}


@dataclass
class World:
    """The rows each door acts on."""

    live: str
    expired: str
    delayed: int
    ready: int


@pytest.fixture
def world() -> World:
    insert_claim(HOSTILE_KEY, seconds=600)
    insert_claim("live", seconds=600)
    insert_claim("expired", seconds=-600)
    delayed = add_message("mail", envelope(HOSTILE_KEY, HOSTILE_TASK), visible_in=600)
    ready = add_message("mail", envelope("ready", {"id": 1}))
    return World("live", "expired", delayed, ready)


@dataclass(frozen=True)
class Door:
    """One view or action: how to go through it, and whether it did anything."""

    name: str
    needs: tuple[str, ...]  # what a user must hold (any one of them)
    method: str
    url: Callable[[World], str]
    data: Callable[[World], dict[str, Any]] | None = None
    done: Callable[[World], bool] | None = None  # its effect, for POSTs


def action(
    name: str, selected: Callable[[World], object], **extra: str
) -> Callable[[World], dict[str, Any]]:
    return lambda w: {"action": name, "_selected_action": [str(selected(w))], "index": "0", **extra}


DOORS = [
    Door("claim list", ("view_claim", "change_claim"), "get", lambda w: CLAIMS),
    Door(
        "claim page",
        ("view_claim", "change_claim"),
        "get",
        lambda w: reverse("admin:astral_taskclaim_claim_change", args=(quote(w.live),)),
    ),
    Door(
        "overview",
        ("view_claim", "change_claim"),
        "get",
        lambda w: reverse("admin:astral_taskclaim_overview"),
    ),
    Door(
        "delete expired (ask)",
        ("delete_claim",),
        "get",
        lambda w: reverse("admin:astral_taskclaim_claim_delete_expired"),
    ),
    Door(
        "delete expired",
        ("delete_claim",),
        "post",
        lambda w: reverse("admin:astral_taskclaim_claim_delete_expired"),
        lambda w: {},
        lambda w: w.expired not in claim_keys(),
    ),
    Door(
        "release claims",
        ("delete_claim",),
        "post",
        lambda w: CLAIMS,
        action("release_claims", lambda w: w.live),
        lambda w: w.live not in claim_keys(),
    ),
    Door("message list", ("view_queuemessage", "change_queuemessage"), "get", lambda w: MESSAGES),
    Door(
        "message page",
        ("view_queuemessage", "change_queuemessage"),
        "get",
        lambda w: reverse("admin:astral_taskclaim_queuemessage_change", args=(w.delayed,)),
    ),
    Door(
        "run now",
        ("change_queuemessage",),
        "post",
        lambda w: MESSAGES,
        action("run_now", lambda w: w.delayed),
        lambda w: (seconds_until_visible(w.delayed) or 1) <= 0,
    ),
    Door(
        "delete messages",
        ("delete_queuemessage",),
        "post",
        lambda w: MESSAGES,
        action("delete_messages", lambda w: w.ready, post="yes"),
        lambda w: seconds_until_visible(w.ready) is None,
    ),
]


def go(client: Client, door: Door, world: World) -> int:
    url = door.url(world)
    if door.method == "get":
        return int(client.get(url).status_code)
    return int(client.post(url, door.data(world) if door.data else {}).status_code)


@pytest.mark.parametrize("door", DOORS, ids=lambda door: door.name)
def test_every_door_checks_its_permission(door: Door, world: World) -> None:
    # Everything else the app offers, and the view permission of the page
    # an action sits on, but not the permission the door needs.
    others = [p for p in CLAIM_PERMS + MESSAGE_PERMS if p not in door.needs]
    lacking = client_for(staff("lacking", *others))
    status = go(lacking, door, world)
    if door.done is None or door.url(world) not in (CLAIMS, MESSAGES):
        assert status == 403, door.name
    if door.done is not None:
        assert not door.done(world), f"{door.name} acted without {door.needs}"
    holding = client_for(
        staff(
            "holding",
            door.needs[0],
            *(("view_claim",) if "claim" in door.needs[0] else ("view_queuemessage",)),
        )
    )
    assert go(holding, door, world) in (200, 302)
    if door.done is not None:
        assert door.done(world), f"{door.name} did nothing with {door.needs[0]}"


@pytest.mark.parametrize("door", DOORS, ids=lambda door: door.name)
def test_anonymous_and_non_staff_users_are_sent_to_log_in(door: Door, world: World) -> None:
    outsider = User.objects.create_user("outsider", password="not-staff-either")
    for client in (Client(), client_for(outsider)):
        url = door.url(world)
        response = (
            client.get(url)
            if door.method == "get"
            else client.post(url, door.data(world) if door.data else {})
        )
        assert response.status_code == 302
        assert reverse("admin:login") in response["Location"]
        if door.done is not None:
            assert not door.done(world)


@pytest.mark.parametrize("door", [d for d in DOORS if d.method == "post"], ids=lambda d: d.name)
def test_every_post_needs_the_csrf_token(door: Door, world: World, admin_user: User) -> None:
    guarded = client_for(admin_user, enforce_csrf_checks=True)
    assert go(guarded, door, world) == 403
    assert door.done is not None
    assert not door.done(world)
    page = guarded.get(door.url(world)).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token is not None
    data = {**(door.data(world) if door.data else {}), "csrfmiddlewaretoken": token.group(1)}
    assert guarded.post(door.url(world), data).status_code in (200, 302)
    assert door.done(world)


def test_hostile_keys_and_tasks_are_shown_escaped(world: World, admin_client: Client) -> None:
    pages = [
        CLAIMS,
        f"{CLAIMS}?{urlencode({'q': HOSTILE_KEY})}",
        reverse("admin:astral_taskclaim_claim_change", args=(quote(HOSTILE_KEY),)),
        reverse("admin:astral_taskclaim_overview"),
        MESSAGES,
        reverse("admin:astral_taskclaim_queuemessage_change", args=(world.delayed,)),
    ]
    for url in pages:
        response = admin_client.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        assert "<script>alert" not in html, url
        assert "<img src=x" not in html, url
    detail = admin_client.get(pages[-1]).content.decode()
    assert "&lt;/pre&gt;&lt;script&gt;alert(" in detail  # the task, escaped, as text
    assert "&lt;img src=x onerror=alert(1)&gt;" in detail
    listed = admin_client.get(pages[1]).content.decode()
    assert "&lt;script&gt;alert(&quot;key&quot;)&lt;/script&gt;" in listed  # found by search
    # The deletion page lists the messages it is about to delete, escaped too.
    asked = admin_client.post(MESSAGES, action("delete_messages", lambda w: w.delayed)(world))
    assert "<script>alert" not in asked.content.decode()
    assert seconds_until_visible(world.delayed) is not None
