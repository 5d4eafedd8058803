"""The lease keeper keeps the claims of the messages a worker runs, on
every queue (leases or not), so a run longer than its window holds its key."""

from __future__ import annotations

import uuid
from datetime import datetime

import pytest
from django.db import connection

from astral_taskclaim.consumer import concurrency
from astral_taskclaim.core.envelope import message_body
from astral_taskclaim.queues.cloudflare import CloudflareQueue
from astral_taskclaim.queues.messages import ReceivedMessage
from astral_taskclaim.worker.leases import LeaseKeeper
from tests.claimkit import end_claim_in, insert_claim
from tests.eventkit import EventWaiter

pytestmark = pytest.mark.django_db(transaction=True)


def cloudflare() -> CloudflareQueue:
    options = {"account_id": "a" * 32, "queue_id": "b" * 32, "api_token": "t" * 40}
    return CloudflareQueue("cf", options=options)


def delivered(key: str, token: str, window: float) -> ReceivedMessage:
    return ReceivedMessage(message_body(key, token, window, {"n": 1}), 1, receipt=key)


def ends() -> dict[str, datetime]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, expires_at FROM taskclaim.claim")
        return dict(cursor.fetchall())


def seconds_left(key: str) -> float:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT extract(epoch FROM expires_at - clock_timestamp()) FROM taskclaim.claim "
            "WHERE key = %s",
            [key],
        )
        [(left,)] = cursor.fetchall()
    return float(left)


def test_claims_about_to_end_are_kept_a_window_on_a_queue_without_leases() -> None:
    ending = insert_claim("ending", seconds=0.2)
    far = insert_claim("far", seconds=600)
    insert_claim("taken", seconds=0.2)  # by a later token than the message's
    messages = [
        delivered("ending", ending, 30),
        delivered("far", far, 30),
        delivered("taken", str(uuid.uuid4()), 30),
        delivered("released", str(uuid.uuid4()), 30),
        ReceivedMessage({"not": "an envelope"}, 1, receipt="x"),
    ]
    before = ends()
    with (
        EventWaiter("worker.claims_kept") as kept,
        LeaseKeeper(cloudflare(), messages, lease_seconds=None, claims="default"),
    ):
        assert kept.wait(30)
    assert kept.records[0].kept == 1  # type: ignore[attr-defined]
    after = ends()
    assert 20 < seconds_left("ending") <= 30
    assert after["far"] == before["far"]
    assert after["taken"] == before["taken"]
    assert "released" not in after


def test_the_keeper_beats_every_third_of_the_shortest_window() -> None:
    token = insert_claim("short", seconds=0.05)
    messages = [delivered("short", token, 0.6), delivered("long", str(uuid.uuid4()), 60)]
    with (
        EventWaiter("worker.claims_kept") as kept,
        LeaseKeeper(cloudflare(), messages, lease_seconds=None, claims="default") as keeper,
    ):
        while len(kept.records) < 3:  # each beat logs; three mean the short interval
            assert kept.wait(30)
            kept._seen.clear()
        assert keeper.interval == pytest.approx(0.2)
    assert 0 < seconds_left("short") <= 0.6


def test_a_failed_keep_is_logged_and_the_runs_go_on() -> None:
    messages = [delivered("k", str(uuid.uuid4()), 30)]
    with (
        EventWaiter("worker.claim_keeping_failed") as failed,
        LeaseKeeper(cloudflare(), messages, lease_seconds=None, claims="no-such-alias"),
    ):
        assert failed.wait(30)
    assert "no-such-alias" in failed.records[0].getMessage()


def test_the_slots_of_running_messages_are_kept_with_their_claims() -> None:
    token = insert_claim("file:1", seconds=30)
    insert_claim("taskclaim-slot:imports:0", seconds=0.05, token=token)
    other = insert_claim("taskclaim-slot:imports:1", seconds=0.05)
    held = {"taskclaim-slot:imports:0": (token, 0.6), "taskclaim-slot:imports:1": (other, 0.6)}
    # This process's runs hold both; only the first is a message of the batch.
    concurrency._held.update(held)
    before = ends()
    try:
        with (
            EventWaiter("worker.claims_kept") as kept,
            LeaseKeeper(
                cloudflare(), [delivered("file:1", token, 30)], lease_seconds=None, claims="default"
            ),
        ):
            assert kept.wait(30)
    finally:
        for key in held:
            concurrency._held.pop(key)
    assert kept.records[0].kept == 1  # type: ignore[attr-defined]  # the slot, not the claim
    assert 0.3 < seconds_left("taskclaim-slot:imports:0") <= 0.6
    assert ends()["taskclaim-slot:imports:1"] == before["taskclaim-slot:imports:1"]


def test_a_settled_messages_claim_is_not_kept_while_its_batch_runs() -> None:
    fast = delivered("fast", insert_claim("fast", seconds=0.05), 0.6)
    slow = delivered("slow", insert_claim("slow", seconds=0.05), 0.6)
    with (
        EventWaiter("worker.claims_kept") as kept,
        LeaseKeeper(cloudflare(), [fast, slow], lease_seconds=None, claims="default"),
    ):
        assert kept.wait(30)
        assert kept.records[0].kept == 2  # type: ignore[attr-defined]
        fast.ack()  # its run is over; its batch-mate runs on
        kept._seen.clear()
        assert kept.wait(30)  # a beat that saw it running has ended
        end_claim_in("fast", 0.05)  # both about to end: a beat keeps what it holds
        end_claim_in("slow", 0.05)
        settled_end = ends()["fast"]
        beats = len(kept.records)
        while not any(r.kept for r in kept.records[beats:]):  # type: ignore[attr-defined]
            kept._seen.clear()
            assert kept.wait(30)
        after = ends()
    assert after["fast"] == settled_end
    assert 0 < seconds_left("slow") <= 0.6
