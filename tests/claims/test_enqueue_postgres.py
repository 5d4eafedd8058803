"""enqueue_claimed on the stock PostgreSQL queue: claim and message in one
statement (taskclaim/enqueue.sql), with the claim-then-send semantics."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import ProgrammingError, connection, transaction
from django.test.utils import CaptureQueriesContext

from astral_taskclaim import claim_task, enqueue_claimed
from astral_taskclaim.core.envelope import message_body
from astral_taskclaim.queues.postgres import PostgresQueue
from tests.claimkit import (
    claims,
    insert_claim,
    restricted_role,
    set_role,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

QUEUE = "one-statement"


@pytest.fixture
def queue() -> Iterator[PostgresQueue]:
    yield PostgresQueue(QUEUE)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [QUEUE])


def messages() -> list[str]:
    """Bodies queued on the test queue, as stored."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT body FROM taskclaim.message WHERE queue = %s ORDER BY id", [QUEUE])
        return [body for (body,) in cursor.fetchall()]


def current_xid() -> object:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_xact_id_if_assigned()")
        row = cursor.fetchone()
    assert row is not None
    return row[0]


def test_claim_and_message_go_in_one_statement(queue: PostgresQueue) -> None:
    task = {"name": 'Zoë "quoted" \\ \n', "n": [1, 2.5, None]}
    with CaptureQueriesContext(connection) as queries:
        token = enqueue_claimed(queue, "room:ü", task, window_seconds=1.5)
    assert len(queries) == 1
    assert token is not None
    assert uuid.UUID(token).version == 4
    assert claims()["room:ü"][0] == token
    # Byte for byte the queue's own encoding of the envelope.
    [body] = messages()
    assert body.encode("utf-8") == queue.encode(message_body("room:ü", token, 1.5, task))
    assert json.loads(body)["task"] == task


def test_a_held_key_queues_nothing_and_takes_no_transaction_id(queue: PostgresQueue) -> None:
    first = enqueue_claimed(queue, "k", 1, window_seconds=600)
    with CaptureQueriesContext(connection) as queries:
        assert enqueue_claimed(queue, "k", 2, window_seconds=600) is None
    assert len(queries) == 1
    with transaction.atomic():
        assert enqueue_claimed(queue, "k", 3, window_seconds=600) is None
        assert current_xid() is None
    assert [json.loads(body)["task"] for body in messages()] == [1]
    assert claims()["k"][0] == first


def test_an_expired_key_is_claimed_again_with_its_message(queue: PostgresQueue) -> None:
    insert_claim("k", seconds=-1)
    token = enqueue_claimed(queue, "k", 1, window_seconds=600)
    assert token is not None
    assert claims()["k"][0] == token
    assert [json.loads(body)["claim"] for body in messages()] == [token]


def tokens() -> dict[str, str]:
    return {key: token for key, (token, _) in claims().items()}


@pytest.mark.parametrize("key", ["held", "expired", "free"])
def test_a_body_too_big_raises_before_anything_is_written(queue: PostgresQueue, key: str) -> None:
    # Checked before the statement, so a held key raises too and the
    # expired claim the statement would replace stays as it was.
    queue.max_body_bytes = 200  # type: ignore[misc]
    claim_task("held", window_seconds=600)
    insert_claim("expired", seconds=-1)
    before = tokens()
    with pytest.raises(ValueError, match=r"'one-statement': body is 3\d\d bytes, over the 200"):
        enqueue_claimed(queue, key, "x" * 300, window_seconds=600)
    assert tokens() == before
    assert messages() == []


def test_a_body_at_the_limit_is_queued_and_one_byte_more_is_not(queue: PostgresQueue) -> None:
    task = "é" * 50
    size = len(queue.encode(message_body("k1", str(uuid.uuid4()), 600, task)))
    queue.max_body_bytes = size  # type: ignore[misc]
    assert enqueue_claimed(queue, "k1", task, window_seconds=600) is not None
    with pytest.raises(ValueError, match=f"body is {size + 1} bytes, over the {size}-byte limit"):
        enqueue_claimed(queue, "k2", task + "x", window_seconds=600)
    assert set(claims()) == {"k1"}
    assert len(messages()) == 1


def test_the_configuration_is_checked_once_per_queue(queue: PostgresQueue) -> None:
    class Counting(PostgresQueue):
        checks = 0

        def check(self) -> list[Any]:
            self.checks += 1
            return super().check()

    counting = Counting(QUEUE)
    enqueue_claimed(counting, "a", 1, window_seconds=600)
    with CaptureQueriesContext(connection) as queries:
        enqueue_claimed(counting, "b", 2, window_seconds=600)
        enqueue_claimed(counting, "a", 3, window_seconds=600)
    assert len(queries) == 2  # still one statement each
    assert counting.checks == 1
    assert [json.loads(body)["task"] for body in messages()] == [1, 2]


def test_a_failed_statement_leaves_neither_claim_nor_message(queue: PostgresQueue) -> None:
    # The role may write claims but not messages: the claim goes back too.
    with restricted_role("SELECT", "INSERT", "UPDATE", "DELETE") as role:
        set_role(role)
        with pytest.raises(ProgrammingError, match="permission denied"):
            enqueue_claimed(queue, "k", 1, window_seconds=600)
    assert claims() == {}
    assert enqueue_claimed(queue, "k", 1, window_seconds=600) is not None


def test_inside_atomic_a_failed_statement_leaves_the_transaction_usable(
    queue: PostgresQueue,
) -> None:
    with restricted_role("SELECT", "INSERT", "UPDATE", "DELETE") as role, transaction.atomic():
        set_role(role)
        with pytest.raises(ProgrammingError, match="permission denied"):
            enqueue_claimed(queue, "k", 1, window_seconds=600)
        with connection.cursor() as cursor:
            cursor.execute("RESET ROLE")
        assert enqueue_claimed(queue, "other", 2, window_seconds=600) is not None
    assert set(claims()) == {"other"}
    assert [json.loads(body)["key"] for body in messages()] == ["other"]


def test_a_subclass_that_overrides_send_is_sent_to(queue: PostgresQueue) -> None:
    sent: list[Any] = []

    class Recording(PostgresQueue):
        def send(self, body: Any, *, delay_seconds: float = 0) -> None:
            sent.append(body)
            super().send(body, delay_seconds=delay_seconds)

    token = enqueue_claimed(Recording(QUEUE), "k", {"id": 1}, window_seconds=600)
    assert sent == [{"key": "k", "claim": token, "windowSeconds": 600, "task": {"id": 1}}]
    assert len(messages()) == 1
