"""enqueue_claimed: the envelope, failed sends, and the transaction rules."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import pytest
from django.db import transaction
from django.db.transaction import TransactionManagementError
from django.test import override_settings

from astral_taskclaim import claim_task, enqueue_claimed
from astral_taskclaim.queues import create_queue
from tests.claimkit import (
    OutboxQueue,
    RecordingQueue,
    claims,
    django_pid,
    restricted_role,
    set_role,
    terminate,
)
from tests.testapp.models import Outbox

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


class SendFailed(Exception):
    pass


def test_sends_the_typescript_envelope_and_returns_the_token() -> None:
    queue = RecordingQueue()
    token = enqueue_claimed(queue, "project:42", {"id": 42}, window_seconds=300)
    assert token is not None
    assert claims()["project:42"][0] == token
    [body] = queue.sent
    assert list(body) == ["key", "claim", "windowSeconds", "task"]
    # Byte for byte what JSON.stringify gives for the TypeScript producer's body.
    typescript = f'{{"key":"project:42","claim":"{token}","windowSeconds":300,"task":{{"id":42}}}}'
    assert json.dumps(body, separators=(",", ":")) == typescript


def test_a_float_window_is_sent_as_given() -> None:
    queue = RecordingQueue()
    enqueue_claimed(queue, "k", None, window_seconds=1.5)
    assert queue.sent[0]["windowSeconds"] == 1.5
    assert queue.sent[0]["task"] is None


def test_a_held_key_sends_nothing_and_returns_none() -> None:
    queue = RecordingQueue()
    first = enqueue_claimed(queue, "k", 1, window_seconds=600)
    assert enqueue_claimed(queue, "k", 2, window_seconds=600) is None
    assert [body["task"] for body in queue.sent] == [1]
    assert claims()["k"][0] == first


def test_a_failed_send_releases_the_claim_and_raises_the_send_error() -> None:
    error = SendFailed("queue down")
    with pytest.raises(SendFailed) as raised:
        enqueue_claimed(RecordingQueue(fail=error), "k", {"id": 1}, window_seconds=600)
    assert raised.value is error
    assert claims() == {}
    assert enqueue_claimed(RecordingQueue(), "k", {"id": 1}, window_seconds=600) is not None


def _release_failure(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    [record] = [r for r in caplog.records if getattr(r, "event", None)]
    assert record.name == "astral_taskclaim.claims.claim"
    assert record.levelno == logging.ERROR
    assert record.event == "queue.claim_release_failed"  # type: ignore[attr-defined]
    assert record.key == "k"  # type: ignore[attr-defined]
    assert record.queue == "recording"  # type: ignore[attr-defined]
    assert record.exc_info is not None
    return record


def test_a_failed_release_after_a_failed_send_is_logged_on_a_revoked_privilege(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="astral_taskclaim")
    error = SendFailed("queue down")
    with restricted_role("SELECT", "INSERT", "UPDATE") as role:
        queue = RecordingQueue(fail=error, before_fail=lambda: set_role(role))
        with pytest.raises(SendFailed) as raised:
            enqueue_claimed(queue, "k", {"id": 1}, window_seconds=600)
    assert raised.value is error
    record = _release_failure(caplog)
    assert "permission denied" in str(record.exc_info[1])  # type: ignore[index]
    assert "k" in claims()  # claimed for the window


def test_a_failed_release_after_a_failed_send_is_logged_on_a_terminated_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="astral_taskclaim")
    error = SendFailed("queue down")
    queue = RecordingQueue(fail=error, before_fail=lambda: terminate(django_pid()))
    with pytest.raises(SendFailed) as raised:
        enqueue_claimed(queue, "k", {"id": 1}, window_seconds=600)
    assert raised.value is error
    _release_failure(caplog)
    # The broken connection was dropped: the next call reconnects and works.
    assert claim_task("k", window_seconds=600) is None
    assert enqueue_claimed(RecordingQueue(), "other", 1, window_seconds=600) is not None


def test_a_key_with_a_newline_is_escaped_in_the_release_failure_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="astral_taskclaim")
    queue = RecordingQueue(fail=SendFailed("down"), before_fail=lambda: terminate(django_pid()))
    with pytest.raises(SendFailed):
        enqueue_claimed(queue, "a\nERROR forged", {"id": 1}, window_seconds=600)
    [record] = [r for r in caplog.records if getattr(r, "event", None)]
    assert record.getMessage().startswith("task a\\nERROR forged: send failed")
    assert record.key == "a\nERROR forged"  # type: ignore[attr-defined]


@pytest.mark.parametrize("transactional", [None, False, 1, "yes"])
def test_a_non_transactional_queue_inside_atomic_raises_before_claiming(
    transactional: Any,
) -> None:
    queue = RecordingQueue()
    if transactional is not None:
        queue.transactional = transactional  # type: ignore[attr-defined]
    with (
        pytest.raises(TransactionManagementError, match="non-transactional queue 'recording'"),
        transaction.atomic(),
    ):
        enqueue_claimed(queue, "k", 1, window_seconds=600)
    assert queue.sent == []
    assert claims() == {}


def test_a_manual_transaction_counts_as_a_transaction() -> None:
    queue = RecordingQueue()
    transaction.set_autocommit(False)
    try:
        with pytest.raises(TransactionManagementError):
            enqueue_claimed(queue, "k", 1, window_seconds=600)
    finally:
        transaction.rollback()
        transaction.set_autocommit(True)
    assert queue.sent == []


def test_a_transactional_queue_commits_claim_and_message_together() -> None:
    queue = OutboxQueue()
    with transaction.atomic():
        token = enqueue_claimed(queue, "k", {"id": 7}, window_seconds=600)
        assert token is not None
    assert claims()["k"][0] == token
    assert [row.body for row in Outbox.objects.all()] == [
        {"key": "k", "claim": token, "windowSeconds": 600, "task": {"id": 7}}
    ]


def test_a_transactional_queue_rolls_back_claim_and_message_together() -> None:
    queue = OutboxQueue()
    tokens: list[str | None] = []

    def enqueue_then_fail() -> None:
        with transaction.atomic():
            tokens.append(enqueue_claimed(queue, "k", {"id": 7}, window_seconds=600))
            raise SendFailed("the caller's transaction fails later")

    with pytest.raises(SendFailed):
        enqueue_then_fail()
    assert tokens[0] is not None
    assert claims() == {}
    assert not Outbox.objects.exists()


def test_a_failed_transactional_send_takes_its_claim_back_and_the_transaction_goes_on() -> None:
    error = SendFailed("full")
    with transaction.atomic():
        with pytest.raises(SendFailed) as raised:
            enqueue_claimed(OutboxQueue(fail=error), "k", 1, window_seconds=600)
        assert raised.value is error
        assert claims() == {}
        assert enqueue_claimed(OutboxQueue(), "other", 2, window_seconds=600) is not None
    assert set(claims()) == {"other"}
    assert Outbox.objects.count() == 1


def test_a_transactional_queue_on_another_database_is_refused_inside_atomic() -> None:
    queue = OutboxQueue()
    queue.database = "elsewhere"  # type: ignore[attr-defined]
    with (
        pytest.raises(TransactionManagementError, match="sends through database 'elsewhere'"),
        transaction.atomic(),
    ):
        enqueue_claimed(queue, "k", 1, window_seconds=600)
    assert claims() == {}
    assert not Outbox.objects.exists()


@override_settings(
    TASKCLAIM_QUEUES={
        "enqueue-test": {"BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue"},
    }
)
def test_the_postgres_queue_commits_with_the_claim_inside_atomic() -> None:
    queue = create_queue("enqueue-test")
    assert queue.transactional

    def enqueue_then_fail() -> None:
        with transaction.atomic():
            enqueue_claimed(queue, "rolled-back", 1, window_seconds=600)
            raise SendFailed("roll back both")

    with pytest.raises(SendFailed):
        enqueue_then_fail()
    with transaction.atomic():
        token = enqueue_claimed(queue, "k", {"id": 1}, window_seconds=600)
    assert set(claims()) == {"k"}
    batch = queue.receive(max_messages=10)
    [message] = batch.messages
    assert message.body == {"key": "k", "claim": token, "windowSeconds": 600, "task": {"id": 1}}
    message.ack()
    queue.settle(batch.messages)


def test_a_transactional_queue_outside_atomic_claims_first_like_any_queue() -> None:
    token = enqueue_claimed(OutboxQueue(), "k", 1, window_seconds=600)
    assert claims()["k"][0] == token
    assert Outbox.objects.get().body["claim"] == token


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda q: enqueue_claimed(q, "", 1, window_seconds=1), ValueError, "key"),
        (lambda q: enqueue_claimed(q, "k", 1, window_seconds=-1), ValueError, "window_seconds"),
        (lambda q: enqueue_claimed(q, "k", object(), window_seconds=1), TypeError, "task"),
        (lambda q: enqueue_claimed(q, "k", [float("nan")], window_seconds=1), ValueError, "task"),
        (lambda q: enqueue_claimed(object(), "k", 1, window_seconds=1), TypeError, "queue"),
        (lambda q: enqueue_claimed(q, "k", 1, window_seconds=1, using="x"), ValueError, "using"),
    ],
)
def test_bad_input_raises_before_claiming(call: Any, error: type[Exception], message: str) -> None:
    queue = RecordingQueue()
    with pytest.raises(error, match=message):
        call(queue)
    assert queue.sent == []
    assert claims() == {}


def test_the_envelope_token_is_the_stored_uuid() -> None:
    queue = RecordingQueue()
    token = enqueue_claimed(queue, "k", 1, window_seconds=60)
    assert token == str(uuid.UUID(queue.sent[0]["claim"]))


@pytest.mark.django_db
def test_the_test_case_transaction_does_not_count() -> None:
    # Like atomic(durable=True): the block a TestCase wraps each test in is
    # not the caller's transaction; an atomic() the test opens is.
    queue = RecordingQueue()
    assert enqueue_claimed(queue, "k", 1, window_seconds=60) is not None
    assert len(queue.sent) == 1
    with pytest.raises(TransactionManagementError), transaction.atomic():
        enqueue_claimed(queue, "other", 1, window_seconds=60)
