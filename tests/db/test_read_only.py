"""A connection on a read-only server (a standby after a failover, reached
through a name that still points at it) is replaced, not retried forever.
A session with ``default_transaction_read_only`` on refuses writes as a
standby does."""

from __future__ import annotations

import logging

import pytest
from django.db import InternalError, connection, transaction

from astral_taskclaim import aclaim_task, claim_task
from astral_taskclaim.claims.async_api import aclose_connections
from astral_taskclaim.db.aio_pool import pool
from tests.aiokit import run
from tests.claimkit import claims, django_pid

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


def read_only_session() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SET default_transaction_read_only = on")
    return django_pid()


def events(caplog: pytest.LogCaptureFixture) -> list[object]:
    return [getattr(record, "event", None) for record in caplog.records]


def test_a_claim_on_a_read_only_server_raises_once_and_the_next_reconnects(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = read_only_session()
    with caplog.at_level(logging.WARNING, logger="astral_taskclaim"):
        with pytest.raises(InternalError, match="read-only transaction"):
            claim_task("k", window_seconds=60)
        assert claim_task("k", window_seconds=60) is not None
    assert django_pid() != before
    assert set(claims()) == {"k"}
    assert events(caplog).count("db.read_only_server") == 1


def test_inside_a_transaction_the_connection_goes_when_django_next_checks_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", None)  # kept for good
    connection.close()
    before = read_only_session()
    with pytest.raises(InternalError), transaction.atomic():
        claim_task("k", window_seconds=60)
    assert django_pid() == before  # Django cannot close it mid-request
    connection.close_if_unusable_or_obsolete()  # what close_old_connections() runs
    assert django_pid() != before
    assert claim_task("k", window_seconds=60) is not None


def test_a_pooled_async_connection_on_a_read_only_server_is_replaced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> tuple[str | None, bool]:
        try:
            assert await aclaim_task("first", window_seconds=60) is not None
            async with (await pool(connection.alias)).connection() as idle:
                await idle.execute("SET default_transaction_read_only = on")
            token = await aclaim_task("second", window_seconds=60)
            return token, idle.closed
        finally:
            await aclose_connections()

    with caplog.at_level(logging.WARNING, logger="astral_taskclaim"):
        token, replaced = run(scenario())
    assert token is not None
    assert replaced
    assert set(claims()) == {"first", "second"}
    assert events(caplog).count("db.read_only_server") == 1
