"""The app's statements through PgBouncer in transaction mode, with no
pooler setting: each transaction may land on another server connection, so
nothing may rely on a prepared statement (or anything else) of a session."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, connections, transaction

from astral_taskclaim import claim_task, hold_task, release_task
from astral_taskclaim.claims.bulk import claim_tasks
from astral_taskclaim.db import connections as db_connections
from astral_taskclaim.db.connections import known_pooler
from tests.claimkit import claims
from tests.pgbouncer.server import PgBouncer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


def claim_hold_release(key: str) -> None:
    try:
        token = claim_task(key, window_seconds=60)
        assert token is not None
        hold_task(key, token, delay_seconds=1, window_seconds=60)
        release_task(key, token)
    finally:
        connections.close_all()


def test_claims_from_many_threads_share_few_server_connections(pgbouncer: PgBouncer) -> None:
    # More clients than the pool has server connections: transactions of
    # every thread interleave on each server connection.
    with ThreadPoolExecutor(max_workers=pgbouncer.pool_size * 2) as pool:
        list(pool.map(claim_hold_release, [f"k{n}" for n in range(200)]))
    assert claims() == {}
    assert known_pooler("default") is True


def test_the_pooler_is_found_once_and_said_once(caplog: pytest.LogCaptureFixture) -> None:
    db_connections._pooled.clear()
    connection.close()
    with caplog.at_level(logging.INFO, logger="astral_taskclaim"):
        for n in range(3):
            assert claim_task(f"k{n}", window_seconds=60) is not None
    events = [getattr(record, "event", None) for record in caplog.records]
    assert events.count("db.pooler_detected") == 1


def test_claims_inside_a_transaction_roll_back_with_it() -> None:
    with transaction.atomic():
        assert claim_task("a", window_seconds=60) is not None
        assert claim_tasks(["b", "c"], window_seconds=60) is not None
        transaction.set_rollback(True)
    assert claims() == {}
    assert claim_task("a", window_seconds=60) is not None
    assert set(claims()) == {"a"}
