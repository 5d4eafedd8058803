"""taskclaim/claim.sql, read first: a held key is answered without writing,
locking or a transaction id; a free or expired key still goes through the
TypeScript package's upsert, exact under concurrency."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest
from django.db import connection, connections, transaction

from astral_taskclaim import claim_task
from astral_taskclaim.testing import hold_transaction
from benchmarks.hot_keys import TS_UPSERT
from tests.claimkit import (
    blocking_pids,
    claims,
    django_pid,
    insert_claim,
    lock_row,
    until,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

# The TypeScript package's claim statement: one upsert, no read first.


def current_xid() -> int | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_xact_id_if_assigned()::text::bigint")
        row = cursor.fetchone()
    assert row is not None
    return None if row[0] is None else int(row[0])


def test_a_held_key_takes_no_transaction_id() -> None:
    token = claim_task("held", window_seconds=600)
    with transaction.atomic():
        assert claim_task("held", window_seconds=600) is None
        assert current_xid() is None
    with transaction.atomic():  # a claim that writes does take one
        assert claim_task("free", window_seconds=600) is not None
        assert current_xid() is not None
    assert claims()["held"][0] == token


def test_the_typescript_upsert_takes_a_transaction_id_for_a_held_key() -> None:
    # What read-first saves: the TypeScript package's statement locks the row even though
    # its WHERE leaves it unchanged.
    claim_task("held", window_seconds=600)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(TS_UPSERT, {"key": "held", "seconds": 600.0})
        assert cursor.fetchall() == []
        assert current_xid() is not None


def test_a_held_key_answers_at_once_while_another_transaction_locks_its_row() -> None:
    token = claim_task("held", window_seconds=600)
    with connection.cursor() as cursor:
        # Were the claim to wait for the row lock, it would fail here
        # instead of hanging the test.
        cursor.execute("SET lock_timeout = '2s'")
    try:
        with hold_transaction(lock_row("held")):
            assert claim_task("held", window_seconds=600) is None
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
    assert claims()["held"][0] == token


def test_an_expired_row_deleted_under_a_waiting_claim_is_claimed() -> None:
    # The claim reads the row as expired, so it goes on to the upsert and
    # waits for the deleting transaction; once that commits, the key is
    # free and the claim takes it. A stale "held" answer would miss it.
    insert_claim("expired", seconds=-1)
    started: Future[int] = Future()
    claimed: Future[str | None] = Future()

    def claimer() -> None:
        try:
            started.set_result(django_pid())
            claimed.set_result(claim_task("expired", window_seconds=600))
        except BaseException as error:
            claimed.set_exception(error)
        finally:
            connections.close_all()

    with hold_transaction(lock_row("expired", delete=True)) as held:
        thread = threading.Thread(target=claimer)
        thread.start()
        pid = started.result(timeout=30)
        until(lambda: held.holder in blocking_pids(pid))
        assert not claimed.done()
    token = claimed.result(timeout=30)
    thread.join()
    assert token is not None
    assert claims()["expired"][0] == token


def test_a_claim_inside_a_rolled_back_transaction_leaves_nothing_and_claims_again() -> None:
    # The rollback also makes psycopg drop its prepared statements: the next
    # claim prepares claim.sql again.
    with transaction.atomic():
        assert claim_task("k", window_seconds=600) is not None
        transaction.set_rollback(True)
    assert claims() == {}
    assert claim_task("k", window_seconds=600) is not None
    assert claim_task("k", window_seconds=600) is None
