"""ClaimGroup: concurrent claims of one process in one statement, answered
exactly as claim_task would answer them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction

from astral_taskclaim.claims.claim import claim_task
from benchmarks.grouped import ClaimGroup
from tests.claimkit import (
    claims,
    insert_claim,
    raw_connection,
    until,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


def test_claims_a_free_key_and_answers_none_while_it_is_held() -> None:
    group = ClaimGroup(window_seconds=60)
    token = group.claim("room:1")
    assert token is not None
    assert claims()["room:1"][0] == token
    assert group.claim("room:1") is None


def test_sees_a_claim_another_process_released_just_before() -> None:
    group = ClaimGroup(window_seconds=60)
    first = group.claim("room:1")
    assert group.claim("room:1") is None
    with raw_connection() as other:
        other.execute("DELETE FROM taskclaim.claim WHERE key = 'room:1'")
    second = group.claim("room:1")
    assert second is not None
    assert second != first


def test_replaces_an_expired_claim() -> None:
    insert_claim("room:1", seconds=-1)
    assert ClaimGroup(window_seconds=60).claim("room:1") is not None


@contextmanager
def statements_seen(gate: threading.Event | None = None) -> Iterator[list[list[str]]]:
    """The keys of each claim statement this thread sends (waiting for
    ``gate`` before sending, when given)."""
    seen: list[list[str]] = []

    def wrapper(execute: Callable[..., Any], sql: str, params: Any, *args: Any) -> Any:
        seen.append(list(params["keys"]))
        if gate is not None:
            gate.wait(30)
        return execute(sql, params, *args)

    with connection.execute_wrapper(wrapper):
        yield seen
    connection.close()


def run_in_threads(
    group: ClaimGroup, keys: list[str], sent: list[list[list[str]]]
) -> tuple[list[Any], list[threading.Thread]]:
    """Starts one thread per key calling ``group.claim``; their results
    (a token, None or the error raised, filled in as they end) and the
    threads."""
    results: list[Any] = [None] * len(keys)

    def call(index: int) -> None:
        with statements_seen() as seen:
            try:
                results[index] = group.claim(keys[index])
            except Exception as error:
                results[index] = error
        sent.append(seen)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(keys))]
    for thread in threads:
        thread.start()
    return results, threads


def test_calls_made_while_a_statement_is_in_flight_go_in_one_statement() -> None:
    group = ClaimGroup(window_seconds=60)
    insert_claim("held", seconds=60)
    gate = threading.Event()
    first: list[Any] = []
    sent: list[list[list[str]]] = []

    def leader() -> None:
        with statements_seen(gate) as seen:
            first.append(group.claim("a"))
        sent.append(seen)

    lead = threading.Thread(target=leader)
    lead.start()
    until(lambda: group._sending)
    keys = ["b", "c", "held", "b", "d"]
    results, threads = run_in_threads(group, keys, sent)
    until(lambda: len(group._pending) == len(keys))
    gate.set()
    for thread in [lead, *threads]:
        thread.join(30)

    statements = sorted((keys for seen in sent for keys in seen), key=len)
    assert statements[0] == ["a"]
    assert len(statements) == 2
    assert sorted(statements[1]) == sorted(set(keys))  # a repeated key sent once
    assert first[0] is not None
    by_key: dict[str, list[Any]] = {}
    for key, token in zip(keys, results, strict=True):
        by_key.setdefault(key, []).append(token)
    assert by_key["held"] == [None]
    assert sum(token is not None for token in by_key["b"]) == 1  # the first of the two
    assert by_key["c"][0] is not None
    assert by_key["d"][0] is not None
    assert set(claims()) == {"a", "b", "c", "d", "held"}


def test_a_failed_statement_raises_in_each_of_its_callers_and_the_group_goes_on() -> None:
    group = ClaimGroup(window_seconds=60)

    def failing(execute: Callable[..., Any], *args: Any) -> Any:
        raise DatabaseError("server went away")

    with connection.execute_wrapper(failing), pytest.raises(DatabaseError, match="went away"):
        group.claim("room:1")
    assert group.claim("room:1") is not None


def test_inside_a_transaction_the_claim_joins_it() -> None:
    group = ClaimGroup(window_seconds=60)
    with transaction.atomic():
        assert group.claim("room:1") is not None
        transaction.set_rollback(True)
    assert "room:1" not in claims()
    assert claim_task("room:1", window_seconds=60) is not None


@pytest.mark.parametrize(
    ("kwargs", "culprit"),
    [
        ({"window_seconds": 0}, "window_seconds"),
        ({"window_seconds": 60, "max_keys": 0}, "max_keys"),
        ({"window_seconds": 60, "max_keys": True}, "max_keys"),
        ({"window_seconds": 60, "using": "nowhere"}, "using"),
    ],
)
def test_bad_settings_are_refused_naming_the_culprit(kwargs: dict[str, Any], culprit: str) -> None:
    with pytest.raises(ValueError, match=culprit):
        ClaimGroup(**kwargs)


def test_a_bad_key_is_refused_before_anything_is_written() -> None:
    with pytest.raises((TypeError, ValueError), match="key"):
        ClaimGroup(window_seconds=60).claim("")
    assert claims() == {}
