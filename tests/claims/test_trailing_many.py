"""enqueue_claimed_many(trailing=...) on the PostgreSQL queue: one statement
for the call, with the outcomes, follow-ups and messages of the same items
enqueued one by one."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from astral_taskclaim import enqueue_claimed, enqueue_claimed_many
from astral_taskclaim.core.validation import Trailing
from astral_taskclaim.queues.base import ClaimedInsert
from astral_taskclaim.queues.postgres import PostgresQueue

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

QUEUE = "trailing-many"
WINDOW = 60
#: key -> (claim's seconds left, or None: no claim; follow-up: None, "pending" or "taken")
STATE: dict[str, tuple[float | None, str | None]] = {
    "free": (None, None),
    "free-2": (None, None),
    "expired-pending": (-5, "pending"),
    "expired": (-5, None),
    "held": (30, None),
    "held-pending": (40, "pending"),
    "held-taken": (50, "taken"),
    "free-taken": (None, "taken"),
}


@pytest.fixture
def queue() -> Iterator[PostgresQueue]:
    yield PostgresQueue(QUEUE, options={"queue_name": QUEUE})
    _reset()


def _reset() -> None:
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [QUEUE])
        cursor.execute("TRUNCATE taskclaim.claim, taskclaim.follow_up")


def _prepare() -> None:
    """The same starting state each time, pre-existing tokens fixed."""
    _reset()
    with connection.cursor() as cursor:
        for index, (key, (seconds, follow_up)) in enumerate(STATE.items()):
            if seconds is not None:
                cursor.execute(
                    "INSERT INTO taskclaim.claim (key, expires_at, token) VALUES "
                    "(%s, now() + make_interval(secs => %s), %s)",
                    [key, seconds, f"00000000-0000-4000-8000-{index:012d}"],
                )
            if follow_up is not None:
                cursor.execute(
                    "INSERT INTO taskclaim.follow_up (token, key, task, window_seconds, "
                    "created_at, updated_at, taken_at) VALUES (%s, %s, '\"old\"', 7, now(), "
                    "now(), CASE WHEN %s THEN now() END)",
                    [f"00000000-0000-4000-9000-{index:012d}", key, follow_up == "taken"],
                )


def _state(results: list[Any]) -> dict[str, Any]:
    """Outcomes, claims, follow-ups and messages, each token named by its
    first appearance (the results', then the rows')."""
    names: dict[str, str] = {}

    def name(token: str) -> str:
        return names.setdefault(str(token), f"t{len(names)}")

    answers = [(name(token), token.outcome) for token in results]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key, token::text, round(extract(epoch FROM expires_at - now())) "
            "FROM taskclaim.claim ORDER BY key"
        )
        held = [(key, name(token), float(left)) for key, token, left in cursor.fetchall()]
        cursor.execute(
            "SELECT key, token::text, task, window_seconds, taken_at IS NOT NULL, "
            "debounce_seconds FROM taskclaim.follow_up ORDER BY key, taken_at NULLS FIRST"
        )
        follow_ups = [(key, name(token), *rest) for key, token, *rest in cursor.fetchall()]
        cursor.execute(
            "SELECT body, round(extract(epoch FROM visible_at - now())) FROM taskclaim.message "
            "WHERE queue = %s ORDER BY id",
            [QUEUE],
        )
        messages = []
        for text, wait in cursor.fetchall():
            body = json.loads(text)
            messages.append(({**body, "claim": name(body["claim"])}, float(wait)))
    return {"answers": answers, "claims": held, "follow_ups": follow_ups, "messages": messages}


class StampingQueue(PostgresQueue):
    """A queue with an ``encode`` of its own: bodies go through it."""

    def encode(self, body: Any) -> bytes:
        return super().encode({"stamp": 1, **body})


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("mode", ["latest", "first"])
def test_one_statement_does_what_the_items_one_by_one_do(
    queue: PostgresQueue, mode: Trailing, seed: int
) -> None:
    if seed == 3:
        queue = StampingQueue(queue.alias, options=queue.options)
    rng = random.Random(seed)
    items = [(rng.choice(list(STATE)), {"n": n}) for n in range(40)]

    _prepare()
    one_by_one = [
        enqueue_claimed(queue, key, task, window_seconds=WINDOW, trailing=mode)
        for key, task in items
    ]
    expected = _state(one_by_one)

    _prepare()
    with CaptureQueriesContext(connection) as captured:
        together = enqueue_claimed_many(queue, items, window_seconds=WINDOW, trailing=mode)
    assert len(captured) == 1
    assert _state(together) == expected
    assert all(body.get("stamp") == (1 if seed == 3 else None) for body, _ in expected["messages"])
    outcomes = {token.outcome for token in together}  # type: ignore[union-attr]
    assert outcomes == {"sent", "follow_up_created", "merged"}


def test_a_repeated_free_key_is_sent_then_followed_up_then_merged(queue: PostgresQueue) -> None:
    items = [("room", {"n": 1}), ("room", {"n": 2}), ("room", {"n": 3})]
    sent, created, merged = enqueue_claimed_many(
        queue, items, window_seconds=WINDOW, trailing="latest"
    )
    assert [sent.outcome, created.outcome, merged.outcome] == [  # type: ignore[union-attr]
        "sent",
        "follow_up_created",
        "merged",
    ]
    assert merged == created != sent
    state = _state([sent, created, merged])
    assert state["follow_ups"] == [("room", "t1", '{"n":3}', WINDOW, False, None)]
    [(now, delay_now), (later, delay_later)] = state["messages"]
    assert (now["claim"], now["trailing"], now["task"], delay_now) == ("t0", True, {"n": 1}, 0)
    assert (later["claim"], later["followUp"], later["task"]) == ("t1", True, {"n": 2})
    assert delay_later == WINDOW


def test_a_body_too_big_raises_before_anything_is_written(queue: PostgresQueue) -> None:
    items = [("a", {"n": 1}), ("b", "x" * queue.max_body_bytes)]
    with pytest.raises(ValueError, match="over the"):
        enqueue_claimed_many(queue, items, window_seconds=WINDOW, trailing="first")
    assert _state([]) == {"answers": [], "claims": [], "follow_ups": [], "messages": []}


def test_first_mode_merging_into_pending_follow_ups_writes_nothing(queue: PostgresQueue) -> None:
    _prepare()
    items = [("held-pending", {"n": 1}), ("held-pending", {"n": 2})]
    with transaction.atomic():
        made = enqueue_claimed_many(queue, items, window_seconds=WINDOW, trailing="first")
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_xact_id_if_assigned()")
            assert cursor.fetchone() == (None,)  # read-only: no transaction id taken
    assert [getattr(token, "outcome", None) for token in made] == ["merged", "merged"]


class ItemByItemQueue(PostgresQueue):
    """A queue whose one-statement insert has no ``trail_many``."""

    def claimed_insert(self, alias: str) -> ClaimedInsert | None:
        insert = super().claimed_insert(alias)
        return insert and replace(insert, trail_many=None)


def test_an_insert_without_trail_many_goes_item_by_item(queue: PostgresQueue) -> None:
    items = [("room", {"n": 1}), ("room", {"n": 2}), ("room", {"n": 3})]
    one_by_one = ItemByItemQueue(QUEUE, options={"queue_name": QUEUE})
    with CaptureQueriesContext(connection) as captured:
        made = enqueue_claimed_many(one_by_one, items, window_seconds=WINDOW, trailing="latest")
    assert len(captured) > 1
    outcomes = [getattr(token, "outcome", None) for token in made]
    assert outcomes == ["sent", "follow_up_created", "merged"]
