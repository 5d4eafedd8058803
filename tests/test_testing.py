"""The testing tools, against real transactions and advisory locks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, connections, transaction

from astral_taskclaim.testing import (
    backend_pid,
    hold_transaction,
    lock_holders,
    lock_waiters,
    rolled_back,
)
from tests.claimkit import claims, insert_claim, raw_connection, until

pytestmark = pytest.mark.django_db(transaction=True)


def locking(statement: str, *params: object) -> Callable[[Callable[[], None]], str]:
    """A body for hold_transaction: runs ``statement`` in a transaction, then holds."""

    def body(hold: Callable[[], None]) -> str:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, list(params))
            hold()
        return "ended"

    return body


@pytest.mark.usefixtures("empty_claims")
def test_rolled_back_returns_the_result_and_undoes_the_writes() -> None:
    def write() -> int:
        insert_claim("k", seconds=60)
        return len(claims())

    assert rolled_back(write) == 1
    assert claims() == {}


@pytest.mark.usefixtures("empty_claims")
def test_rolled_back_propagates_an_error_and_still_rolls_back() -> None:
    def write_then_fail() -> None:
        insert_claim("k", seconds=60)
        raise LookupError("boom")

    with pytest.raises(LookupError, match="boom"):
        rolled_back(write_then_fail)
    assert claims() == {}


@pytest.mark.usefixtures("empty_claims")
def test_rolled_back_inside_a_transaction_rolls_back_to_a_savepoint() -> None:
    with transaction.atomic():
        insert_claim("kept", seconds=60)
        rolled_back(lambda: insert_claim("undone", seconds=60))
    assert set(claims()) == {"kept"}


def test_backend_pid_is_this_threads_session() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone() == (backend_pid(),)
    other: list[int] = []

    def in_thread() -> None:
        try:
            other.append(backend_pid())
        finally:
            connections.close_all()

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    assert other[0] != backend_pid()


@pytest.mark.parametrize("key", [42, -1, 2**63 - 1, -(2**63), 2**32, 2**32 - 1])
def test_lock_holders_finds_the_holder_of_a_bigint_key(key: int) -> None:
    assert lock_holders(key) == []
    with hold_transaction(locking("SELECT pg_advisory_xact_lock(CAST(%s AS bigint))", key)) as held:
        assert lock_holders(key) == [held.holder]
        assert lock_holders(key + 1 if key < 2**63 - 1 else key - 1) == []
    assert held.result() == "ended"
    assert lock_holders(key) == []


def test_lock_holders_finds_a_named_lock_and_shared_holders() -> None:
    name = "refresh:project:42"
    statement = "SELECT pg_advisory_xact_lock_shared(hashtextextended(%s, 0))"
    with (
        hold_transaction(locking(statement, name)) as first,
        hold_transaction(locking(statement, name)) as second,
    ):
        assert lock_holders(name) == sorted([first.holder, second.holder])
        assert lock_holders("another name") == []


def test_a_session_lock_held_by_this_connection_is_seen() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(7)")
        try:
            assert lock_holders(7) == [backend_pid()]
        finally:
            cursor.execute("SELECT pg_advisory_unlock(7)")
    assert lock_holders(7) == []


def test_lock_waiters_lists_the_sessions_queued_behind_the_holder() -> None:
    with (
        hold_transaction(locking("SELECT pg_advisory_xact_lock(99)")) as held,
        raw_connection() as waiter,
    ):
        waiter_pid = waiter.info.backend_pid
        acquired = threading.Event()

        def wait_for_lock() -> None:
            waiter.execute("SELECT pg_advisory_lock(99)")
            acquired.set()

        thread = threading.Thread(target=wait_for_lock)
        thread.start()
        until(lambda: lock_waiters(99, held.holder) == [waiter_pid])
        assert lock_waiters(98, held.holder) == []
        assert lock_waiters(99, backend_pid()) == []  # not behind this session
        assert lock_holders(99) == [held.holder]
        assert not acquired.is_set()
        held.release()
        thread.join()
        assert acquired.is_set()
        assert lock_holders(99) == [waiter_pid]
        assert lock_waiters(99, held.holder) == []
        waiter.execute("SELECT pg_advisory_unlock(99)")


@pytest.mark.parametrize(
    ("lock", "error"),
    [(True, TypeError), (1.5, TypeError), (None, TypeError), (2**63, ValueError),
     (-(2**63) - 1, ValueError), ("a\x00b", ValueError)],
)  # fmt: skip
def test_a_bad_lock_is_rejected(lock: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="lock"):
        lock_holders(lock)
    with pytest.raises(error, match="lock"):
        lock_waiters(lock, 1)


@pytest.mark.parametrize("holder", [0, -5, True, "123", None])
def test_a_bad_holder_is_rejected(holder: Any) -> None:
    with pytest.raises(ValueError, match="holder"):
        lock_waiters(1, holder)


def test_hold_transaction_fails_when_the_transaction_ends_before_holding() -> None:
    with pytest.raises(RuntimeError, match="ended before holding") as raised:
        hold_transaction(lambda hold: "never held")
    assert raised.value.__cause__ is None


def test_hold_transaction_fails_with_the_bodys_error_as_cause() -> None:
    def body(hold: Callable[[], None]) -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT 1/0")
            hold()

    with pytest.raises(RuntimeError, match="ended before holding") as raised:
        hold_transaction(body)
    assert "division by zero" in str(raised.value.__cause__)


def test_the_held_transaction_stays_open_until_released() -> None:
    with hold_transaction(locking("SELECT pg_advisory_xact_lock(5)")) as held:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(5)")
            assert cursor.fetchone() == (False,)
        assert not held.done
    assert held.done
    assert lock_holders(5) == []


def test_leaving_the_block_reraises_the_bodys_error_after_release() -> None:
    def body(hold: Callable[[], None]) -> None:
        hold()
        raise LookupError("after release")

    with pytest.raises(LookupError, match="after release"), hold_transaction(body):
        pass
