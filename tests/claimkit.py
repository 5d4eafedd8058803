"""Shared tools for the claim tests: reading the claim table, restricted
roles and terminated backends (real failures), recording queues."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import DatabaseError, connection, connections, transaction
from psycopg import sql

from astral_taskclaim.db.connections import separate_connection
from tests.testapp.models import Outbox


def claims() -> dict[str, tuple[str, float]]:
    """Every claim: key → (token, seconds until it expires, by the server clock)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT key, token::text, extract(epoch FROM expires_at - clock_timestamp())
               FROM taskclaim.claim"""
        )
        return {key: (token, float(left)) for key, token, left in cursor.fetchall()}


def insert_claim(key: str, *, seconds: float, token: str | None = None) -> str:
    """Writes a claim row directly (``seconds`` may be negative: expired)."""
    token = token or str(uuid.uuid4())
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO taskclaim.claim (key, expires_at, token)
               VALUES (%s, clock_timestamp() + make_interval(secs => %s), %s)""",
            [key, seconds, token],
        )
    return token


def end_claim_in(key: str, seconds: float) -> None:
    """Makes ``key``'s claim end ``seconds`` from now."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE taskclaim.claim SET expires_at = clock_timestamp() + make_interval(secs => %s) "
            "WHERE key = %s",
            [seconds, key],
        )


def lock_row(key: str, *, delete: bool = False) -> Callable[[Callable[[], None]], None]:
    """A ``hold_transaction`` body locking ``key``'s row (and deleting it,
    as ``taskclaim_delete_expired`` does, when ``delete``)."""

    def body(hold: Callable[[], None]) -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM taskclaim.claim WHERE key = %s FOR UPDATE", [key])
            if delete:
                cursor.execute("DELETE FROM taskclaim.claim WHERE key = %s", [key])
            hold()

    return body


def blocking_pids(pid: int) -> list[int]:
    """The backends whose locks backend ``pid`` waits for."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_blocking_pids(%s)", [pid])
        row = cursor.fetchone()
    assert row is not None
    return list(row[0])


def raw_connection() -> psycopg.Connection[Any]:
    """A psycopg connection of its own to the test database (autocommit)."""
    return separate_connection(connection)


def terminate(pid: int) -> None:
    """Terminates backend ``pid`` and waits until it is gone."""
    with raw_connection() as other:
        row = other.execute("SELECT pg_terminate_backend(%s, 10000)", [pid]).fetchone()
    assert row == (True,)


def django_pid() -> int:
    """This thread's Django connection's backend pid."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


@contextmanager
def restricted_role(*privileges: str) -> Iterator[str]:
    """A fresh role with only ``privileges`` on ``taskclaim.claim``; yields
    its name. ``SET ROLE`` to it makes the other claim writes fail for real."""
    role = f"taskclaim_test_{uuid.uuid4().hex[:12]}"
    with raw_connection() as admin:
        admin.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))
        admin.execute(sql.SQL("GRANT USAGE ON SCHEMA taskclaim TO {}").format(sql.Identifier(role)))
        if privileges:
            admin.execute(
                sql.SQL("GRANT {} ON taskclaim.claim TO {}").format(
                    sql.SQL(", ").join(sql.SQL(p) for p in privileges), sql.Identifier(role)
                )
            )
    try:
        yield role
    finally:
        for alias in connections:
            wrapper = connections[alias]
            if wrapper.vendor != "postgresql" or wrapper.connection is None:
                continue
            try:
                with wrapper.cursor() as cursor:
                    cursor.execute("RESET ROLE")
            except DatabaseError:
                wrapper.close()  # terminated by the test: nothing to reset
        with raw_connection() as admin:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def set_role(role: str) -> None:
    """``SET ROLE`` on this thread's Django connection."""
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)).as_string())


class RecordingQueue:
    """A queue that keeps what it is sent; ``fail`` makes ``send`` raise it
    (after running ``before_fail``, to break something for real)."""

    name = "recording"

    def __init__(self, *, fail: BaseException | None = None, before_fail: Any = None) -> None:
        self.sent: list[Any] = []
        self.fail = fail
        self.before_fail = before_fail

    def send(self, body: Any) -> None:
        if self.fail is not None:
            if self.before_fail is not None:
                self.before_fail()
            raise self.fail
        self.sent.append(body)


class OutboxQueue(RecordingQueue):
    """A transactional queue: ``send`` writes an ``Outbox`` row through the
    caller's connection, so it commits or rolls back with the claim."""

    name = "outbox"
    transactional = True

    def send(self, body: Any) -> None:
        Outbox.objects.create(body=body)
        super().send(body)


def until(condition: Callable[[], bool], *, timeout: float = 30.0) -> None:
    """Waits for ``condition()``, for states PostgreSQL offers no event for
    (a session starting to wait on a lock). Fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(0.01)
