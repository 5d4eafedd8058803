"""claim_tasks and enqueue_claimed_many: the single calls' semantics, in bulk."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import pytest
from django.db import ProgrammingError, connection, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from astral_taskclaim.claims.bulk import _fresh_tokens, claim_tasks, enqueue_claimed_many
from astral_taskclaim.claims.claim import claim_task
from astral_taskclaim.core.envelope import message_body
from astral_taskclaim.queues.base import PartlySentError
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.queues.postgres import PostgresQueue
from tests.claimkit import (
    claims,
    insert_claim,
    restricted_role,
    set_role,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


class ManyQueue:
    """A non-transactional queue recording ``send_many`` batches; the
    ``fail_at``-th call raises."""

    name = "many"
    max_batch_size = 2

    def __init__(self, *, fail_at: int | None = None) -> None:
        self.batches: list[list[Any]] = []
        self.fail_at = fail_at

    def send_many(self, bodies: list[Any]) -> None:
        if self.fail_at is not None and len(self.batches) == self.fail_at:
            raise ConnectionError("queue down")
        self.batches.append(list(bodies))


@pytest.fixture
def pg_queue():
    queue = PostgresQueue("bulk-test")
    yield queue
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = 'bulk-test'")


def messages() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT body FROM taskclaim.message WHERE queue = 'bulk-test' ORDER BY id")
        return [body for (body,) in cursor.fetchall()]


@pytest.mark.parametrize("atomic", [False, True], ids=["plain inserts", "upsert"])
def test_claim_tasks_claims_free_and_expired_keys_only(atomic: bool) -> None:
    # Outside a transaction absent keys are inserted plainly; inside one the
    # upsert claims them all (tests/db/sql/test_claim_many.py has the races).
    held = claim_task("held", window_seconds=600)
    insert_claim("expired", seconds=-1)
    with transaction.atomic() if atomic else nullcontext():
        tokens = claim_tasks(["a", "held", "expired", "a"], window_seconds=60)
    assert tokens[1] is None
    assert tokens[3] is None
    stored = claims()
    assert stored["a"][0] == tokens[0]
    assert stored["expired"][0] == tokens[2]
    assert stored["held"][0] == held
    assert 50 < stored["a"][1] <= 60


def test_claim_tasks_checks_every_key_before_writing() -> None:
    with pytest.raises(ValueError, match=r"keys\[1\]"):
        claim_tasks(["ok", ""], window_seconds=60)
    with pytest.raises(TypeError, match="keys must be a list"):
        claim_tasks("abc", window_seconds=60)
    assert claims() == {}


def test_postgres_queue_gets_envelopes_in_order_with_claims_in_one_statement(pg_queue) -> None:
    claim_task("held", window_seconds=600)
    items = [("k1", {"n": 1}), ("held", {"n": 2}), ("k2", {"n": 3}), ("k1", {"n": 4})]
    tokens = enqueue_claimed_many(pg_queue, items, window_seconds=300)
    assert tokens[1] is None
    assert tokens[3] is None
    bodies = [json.loads(body) for body in messages()]
    assert [b["key"] for b in bodies] == ["k1", "k2"]
    assert [list(b) for b in bodies] == [["key", "claim", "windowSeconds", "task"]] * 2
    assert [b["claim"] for b in bodies] == [tokens[0], tokens[2]]
    assert claims()["k2"][0] == tokens[2]


def test_postgres_queue_rolls_claims_back_with_the_callers_transaction(pg_queue) -> None:
    def enqueue_then_fail() -> None:
        with transaction.atomic():
            enqueue_claimed_many(pg_queue, [("k", 1)], window_seconds=300)
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        enqueue_then_fail()
    assert claims() == {}
    assert messages() == []


def test_a_bad_task_raises_before_anything_is_written(pg_queue) -> None:
    with pytest.raises(TypeError, match=r"items\[1\] task"):
        enqueue_claimed_many(pg_queue, [("a", 1), ("b", object())], window_seconds=60)
    assert claims() == {}
    assert messages() == []


def test_other_queues_get_batches_and_a_failed_send_releases_the_unsent() -> None:
    queue = ManyQueue(fail_at=1)
    items = [(f"k{i}", i) for i in range(5)]
    with pytest.raises(ConnectionError):
        enqueue_claimed_many(queue, items, window_seconds=300)
    [sent] = queue.batches
    assert [body["key"] for body in sent] == ["k0", "k1"]
    assert set(claims()) == {"k0", "k1"}  # the unsent three were released


class HalfSentQueue(ManyQueue):
    """Sends the first body of each batch, then fails naming the rest."""

    def send_many(self, bodies: list[Any]) -> None:
        self.batches.append(list(bodies[:1]))
        raise PartlySentError("queue down mid-batch", unsent=range(1, len(bodies)))


def test_a_batch_sent_in_part_keeps_the_claims_of_the_bodies_sent() -> None:
    queue = HalfSentQueue()
    with pytest.raises(PartlySentError):
        enqueue_claimed_many(queue, [(f"k{i}", i) for i in range(5)], window_seconds=300)
    assert [[body["key"] for body in batch] for batch in queue.batches] == [["k0"]]
    assert set(claims()) == {"k0"}  # k1 (unsent in the batch) and k2-k4 were released


def test_other_queues_refuse_a_transaction() -> None:
    with pytest.raises(TransactionManagementError), transaction.atomic():
        enqueue_claimed_many(ManyQueue(), [("k", 1)], window_seconds=60)
    assert claims() == {}


class TransactionalManyQueue(ManyQueue):
    """A transactional queue whose sends go through database ``database``."""

    transactional = True

    def __init__(self, database: str) -> None:
        super().__init__()
        self.database = database


def test_a_transactional_queue_on_another_database_is_refused_inside_atomic() -> None:
    queue = TransactionalManyQueue("elsewhere")
    with (
        pytest.raises(TransactionManagementError, match="sends through database 'elsewhere'"),
        transaction.atomic(),
    ):
        enqueue_claimed_many(queue, [("k", 1)], window_seconds=60)
    assert queue.batches == []
    assert claims() == {}


def test_a_transactional_queue_on_the_claims_database_joins_the_transaction() -> None:
    queue = TransactionalManyQueue("default")
    with transaction.atomic():
        [token] = enqueue_claimed_many(queue, [("k", 1)], window_seconds=60)
    assert [[body["claim"] for body in batch] for batch in queue.batches] == [[token]]
    assert claims()["k"][0] == token


def test_postgres_queue_takes_one_statement_and_bodies_are_the_queues_encoding(pg_queue) -> None:
    tasks = [{"name": 'Zoë "q" \\ \n\t\x01'}, [1, 2.5, None, True], "🚀", None]
    items = [(f"room:{i}:ü", task) for i, task in enumerate(tasks)]
    for window in (300, 1.5):
        with CaptureQueriesContext(connection) as queries:
            tokens = enqueue_claimed_many(pg_queue, items, window_seconds=window)
        assert len(queries) == 1
        bodies = messages()[-len(items) :]
        for (key, task), token, body in zip(items, tokens, bodies, strict=True):
            assert token is not None
            assert body.encode("utf-8") == pg_queue.encode(message_body(key, token, window, task))
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE taskclaim.claim")


def test_fresh_tokens_are_distinct_version_4_uuids() -> None:
    tokens = _fresh_tokens(2000)
    assert len(set(tokens)) == 2000
    for token in tokens:
        parsed = uuid.UUID(token)
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert str(parsed) == token
    assert _fresh_tokens(0) == []


def tokens() -> dict[str, str]:
    return {key: token for key, (token, _) in claims().items()}


@pytest.mark.parametrize(
    "items",
    [
        [("held", "x" * 300)],
        [("expired", "x" * 300)],
        [("free", 1), ("free2", "x" * 300)],
        # A repeated key is never sent, but the single call would raise for it.
        [("free", 1), ("free", "x" * 300)],
    ],
    ids=["held", "expired", "free", "repeated"],
)
def test_a_body_too_big_raises_before_anything_is_written(
    pg_queue, items: list[tuple[str, Any]]
) -> None:
    pg_queue.max_body_bytes = 200
    claim_task("held", window_seconds=600)
    insert_claim("expired", seconds=-1)
    before = tokens()
    with pytest.raises(ValueError, match=r"queue 'bulk-test': body is 3\d\d bytes, over the 200"):
        enqueue_claimed_many(pg_queue, items, window_seconds=60)
    assert tokens() == before
    assert messages() == []


class OwnEncode(PostgresQueue):
    """Overrides ``encode`` alone: the one-statement path writes its bodies
    through it (``writer_of``), counting the calls."""

    encoded = 0

    def encode(self, body: Any) -> bytes:
        self.encoded += 1
        return super().encode(body)


@pytest.mark.parametrize("kind", ["stock", "own-encode", "memory"])
def test_a_body_at_the_limit_is_sent_and_one_byte_more_is_not(pg_queue, kind: str) -> None:
    """The stock one-statement path measures bodies itself; the others
    encode them with a stand-in token first: all exactly as the queue's
    ``encode`` would with the real token."""
    queue: Any = {
        "stock": lambda: pg_queue,
        "own-encode": lambda: OwnEncode("bulk-test"),
        "memory": lambda: MemoryQueue("bulk", options={"queue_name": f"bulk-{uuid.uuid4()}"}),
    }[kind]()
    task = {"name": "é" * 50}
    size = len(queue.encode(message_body("k:ü", str(uuid.uuid4()), 1.5, task)))
    queue.max_body_bytes = size
    assert enqueue_claimed_many(queue, [("k:ü", task)], window_seconds=1.5)[0] is not None
    too_big = {"name": "é" * 50 + "x"}
    with pytest.raises(ValueError, match=f"body is {size + 1} bytes, over the {size}-byte limit"):
        enqueue_claimed_many(queue, [("k:ö", too_big)], window_seconds=1.5)
    assert set(claims()) == {"k:ü"}
    if kind == "own-encode":
        assert queue.encoded == 3  # measuring, then each insert's body


def test_inside_atomic_a_failed_statement_leaves_the_transaction_usable(pg_queue) -> None:
    with restricted_role("SELECT", "INSERT", "UPDATE", "DELETE") as role, transaction.atomic():
        set_role(role)
        with pytest.raises(ProgrammingError, match="permission denied"):
            enqueue_claimed_many(pg_queue, [("k", 1)], window_seconds=60)
        with connection.cursor() as cursor:
            cursor.execute("RESET ROLE")
        assert enqueue_claimed_many(pg_queue, [("other", 2)], window_seconds=60)[0]
    assert set(claims()) == {"other"}
    assert [json.loads(body)["key"] for body in messages()] == ["other"]


def test_a_subclass_that_overrides_send_many_is_sent_to(pg_queue) -> None:
    batches: list[list[Any]] = []

    class Recording(PostgresQueue):
        def send_many(self, bodies: Sequence[Any]) -> None:
            batches.append(list(bodies))
            super().send_many(bodies)

    tokens = enqueue_claimed_many(Recording("bulk-test"), [("a", 1), ("b", 2)], window_seconds=60)
    assert [[body["claim"] for body in batch] for batch in batches] == [tokens]
    assert len(messages()) == 2
