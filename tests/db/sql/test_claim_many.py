"""taskclaim/claim_many.sql and claim_many_upsert.sql: claim_tasks inserts
absent keys plainly outside a transaction, and falls back on the upsert when
another session inserts one of its keys meanwhile, or when it runs inside a
transaction a failed statement would abort."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

import pytest
from django.db import OperationalError, connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from astral_taskclaim.claims.bulk import claim_tasks
from astral_taskclaim.db import sqlfiles
from astral_taskclaim.testing import HeldTransaction, hold_transaction
from tests.claimkit import (
    blocking_pids,
    claims,
    django_pid,
    insert_claim,
    lock_row,
    raw_connection,
    until,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

RACED = "claims.bulk_claim_raced"
PLAIN = "taskclaim/claim_many.sql"
UPSERT = "taskclaim/claim_many_upsert.sql"


def inserting(key: str, *, commit: bool = True) -> Callable[[Callable[[], None]], None]:
    """A ``hold_transaction`` body that inserts a claim of ``key``, holds,
    then commits (or rolls back)."""

    def body(hold: Callable[[], None]) -> None:
        with transaction.atomic():
            insert_claim(key, seconds=600, token="00000000-0000-4000-8000-0000000000aa")
            hold()
            transaction.set_rollback(not commit)

    return body


@contextmanager
def claiming_behind(
    held: HeldTransaction, keys: list[str], *, atomic: bool = False
) -> Iterator[Future[list[str | None]]]:
    """Runs ``claim_tasks(keys)`` in a thread (inside ``atomic()`` when
    asked) and yields its result once it waits on ``held``'s transaction."""
    started: Future[int] = Future()
    result: Future[list[str | None]] = Future()

    def claimer() -> None:
        try:
            started.set_result(django_pid())
            if atomic:
                with transaction.atomic():
                    tokens = claim_tasks(keys, window_seconds=600)
                    # The transaction is still usable after the race.
                    tokens.append(claim_tasks(["after"], window_seconds=600)[0])
            else:
                tokens = claim_tasks(keys, window_seconds=600)
            result.set_result(tokens)
        except BaseException as error:
            result.set_exception(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=claimer)
    thread.start()
    pid = started.result(timeout=30)
    until(lambda: held.holder in blocking_pids(pid))
    assert not result.done()
    try:
        yield result
    finally:
        held.release()
        thread.join()


def statements_run(keys: list[str]) -> list[str]:
    """The first lines of the statements ``claim_tasks(keys)`` sends, in
    order (the log has the values filled in)."""
    with CaptureQueriesContext(connection) as queries:
        assert None not in claim_tasks(keys, window_seconds=60)
    return [query["sql"].split("\n", 1)[0] for query in queries.captured_queries]


def test_new_keys_take_one_statement_and_an_expired_one_the_upsert_whole() -> None:
    # Renewing the expired key after the plain inserts would break the one
    # bytewise order every bulk claim takes rows in (and could deadlock).
    plain, upsert = (sqlfiles.read(path).split("\n", 1)[0] for path in (PLAIN, UPSERT))
    assert statements_run(["new:a", "new:b"]) == [plain]
    insert_claim("old", seconds=-1)
    assert statements_run(["new:c", "old"]) == [plain, upsert]
    assert set(claims()) == {"new:a", "new:b", "new:c", "old"}


def test_a_call_waiting_on_an_expired_key_holds_no_later_key() -> None:
    # Rows are taken in one bytewise order: while the call waits for "e"
    # (locked by another transaction) it must not hold "f" yet, or that
    # transaction, claiming "e" then "f" in the same order, would deadlock
    # with it. Were "f" inserted already, the probe's insert would wait.
    insert_claim("e", seconds=-1)
    with (
        hold_transaction(lock_row("e")) as held,
        claiming_behind(held, ["e", "f"]) as result,
        raw_connection() as probe,
        probe.transaction(force_rollback=True),
    ):
        probe.execute("SET LOCAL lock_timeout = '5s'")
        probe.execute(
            "INSERT INTO taskclaim.claim (key, expires_at, token) "
            "VALUES ('f', now(), gen_random_uuid())"
        )
    tokens = result.result(timeout=30)
    assert None not in tokens
    assert [claims()[key][0] for key in ("e", "f")] == tokens


def test_a_key_inserted_by_another_session_meanwhile_is_left_to_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="astral_taskclaim.claims.bulk")
    with (
        hold_transaction(inserting("contested")) as held,
        claiming_behind(held, ["a", "contested", "b"]) as result,
    ):
        pass
    tokens = result.result(timeout=30)
    assert tokens[1] is None
    stored = claims()
    assert stored["contested"][0] == "00000000-0000-4000-8000-0000000000aa"
    assert [stored["a"][0], stored["b"][0]] == [tokens[0], tokens[2]]
    assert [r.event for r in caplog.records if hasattr(r, "event")] == [RACED]


def test_a_rolled_back_insert_meanwhile_leaves_the_key_to_the_plain_insert(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="astral_taskclaim.claims.bulk")
    with (
        hold_transaction(inserting("contested", commit=False)) as held,
        claiming_behind(held, ["a", "contested"]) as result,
    ):
        pass
    tokens = result.result(timeout=30)
    assert None not in tokens
    assert claims()["contested"][0] == tokens[1]
    assert not [r for r in caplog.records if getattr(r, "event", None) == RACED]


def test_inside_a_transaction_a_race_neither_fails_nor_breaks_it() -> None:
    with (
        hold_transaction(inserting("contested")) as held,
        claiming_behind(held, ["a", "contested"], atomic=True) as result,
    ):
        pass
    tokens = result.result(timeout=30)
    assert tokens[1] is None
    assert tokens[0] is not None
    assert tokens[2] is not None
    assert set(claims()) == {"a", "contested", "after"}


def test_an_error_that_is_no_race_is_raised_as_it_is() -> None:
    with connection.cursor() as cursor:
        # Waiting on the other session's insert times out: no race lost.
        cursor.execute("SET statement_timeout = '50ms'")
    try:
        with hold_transaction(inserting("contested")) as held:
            with pytest.raises(OperationalError, match="statement timeout"):
                claim_tasks(["contested"], window_seconds=60)
            held.release()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET statement_timeout")
    assert set(claims()) == {"contested"}


def test_overlapping_bulk_claims_from_many_sessions_claim_each_key_once() -> None:
    # Four sessions claim shuffled, overlapping lists at once, over rounds:
    # whichever statement each ends up running (plain inserts, or the upsert
    # for an expired key or after a lost race), none deadlocks, and every
    # free or expired key has exactly one winner,
    # whose token is the one stored, and a held key has none.
    rng = random.Random(7)
    sessions = 4
    for round_ in range(5):
        held = {
            f"r{round_}:held:{i}": insert_claim(f"r{round_}:held:{i}", seconds=600)
            for i in range(20)
        }
        expired = [f"r{round_}:expired:{i}" for i in range(40)]
        for key in expired:
            insert_claim(key, seconds=-1)
        free = [f"r{round_}:free:{i}" for i in range(140)]
        # Half the sessions have no expired key (plain inserts), half do
        # (the upsert): both kinds take rows in the same order.
        every, unexpired = [*held, *expired, *free], [*held, *free]
        lists = [rng.sample(every if n % 2 else unexpired, k=120) for n in range(sessions)]
        barrier = threading.Barrier(sessions)

        def claim(keys: list[str], barrier: threading.Barrier = barrier) -> list[str | None]:
            try:
                barrier.wait(timeout=30)
                return claim_tasks(keys, window_seconds=600)
            finally:
                connections.close_all()

        with ThreadPoolExecutor(sessions) as pool:
            results = list(pool.map(claim, lists))
        winners: dict[str, list[str]] = {}
        for keys, tokens in zip(lists, results, strict=True):
            for key, token in zip(keys, tokens, strict=True):
                if token is not None:
                    winners.setdefault(key, []).append(token)
        asked = set().union(*map(set, lists))
        assert set(winners) == asked - set(held)
        assert all(len(tokens) == 1 for tokens in winners.values())
        stored = claims()
        assert {key: stored[key][0] for key in winners} == {
            key: tokens[0] for key, tokens in winners.items()
        }
        assert {key: stored[key][0] for key in held} == held
