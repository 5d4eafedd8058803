"""statements.run: prepared statements on Django's connection, with Django's
connection handling, error classes, hooks and query log."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import (
    OperationalError,
    ProgrammingError,
    close_old_connections,
    connection,
    transaction,
)
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext, override_settings

from astral_taskclaim import claim_task, hold_task, release_task, statements
from tests.claimkit import (
    claims,
    django_pid,
    empty_claims,  # noqa: F401  (a fixture)
    insert_claim,
    restricted_role,
    set_role,
    terminate,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


def prepared() -> list[str]:
    """Statements prepared in this connection's session."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [statement for (statement,) in cursor.fetchall()]


def claim_hold_release() -> None:
    token = claim_task("k", window_seconds=60)
    assert token is not None
    hold_task("k", token, delay_seconds=1, window_seconds=60)
    release_task("k", token)


@pytest.fixture
def fresh_connection() -> Iterator[None]:
    """A new connection before and after the test, so settings changed by
    the test apply to the connection it uses, and not to the next one."""
    connection.close()
    yield
    connection.close()


@pytest.mark.usefixtures("fresh_connection")
def test_claim_hold_and_release_run_as_prepared_statements() -> None:
    claim_hold_release()
    statements_text = "\n".join(prepared())
    for table_write in ("INSERT INTO taskclaim.claim", "DELETE FROM taskclaim.claim"):
        assert table_write in statements_text
    assert len(prepared()) == 3
    claim_hold_release()  # the same three statements, reused
    assert len(prepared()) == 3


@pytest.mark.usefixtures("fresh_connection")
def test_the_applications_own_queries_stay_unprepared() -> None:
    claim_task("k", window_seconds=60)
    with connection.cursor() as cursor:
        for _ in range(10):
            cursor.execute("SELECT count(*) FROM taskclaim.claim WHERE key = %s", ["k"])
    assert not any("count(*)" in statement for statement in prepared())


@pytest.mark.usefixtures("fresh_connection")
@pytest.mark.parametrize(
    "pooler",
    [{"DISABLE_SERVER_SIDE_CURSORS": True}, {"OPTIONS": {"prepare_threshold": None}}],
    ids=["disable_server_side_cursors", "prepare_threshold_none"],
)
def test_pooler_settings_keep_claims_unprepared(
    pooler: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in pooler.items():
        if isinstance(value, dict):
            value = {**connection.settings_dict.get(name, {}), **value}
        monkeypatch.setitem(connection.settings_dict, name, value)
    assert not statements.may_prepare(connection)
    claim_hold_release()
    assert prepared() == []
    assert claims() == {}


def test_errors_are_djangos() -> None:
    with restricted_role("SELECT") as role:
        set_role(role)
        with pytest.raises(ProgrammingError, match="permission denied"):
            claim_task("k", window_seconds=60)


def test_a_terminated_connection_raises_and_the_next_request_reconnects() -> None:
    assert claim_task("a", window_seconds=60) is not None
    terminate(django_pid())
    with pytest.raises(OperationalError):
        claim_task("b", window_seconds=60)
    close_old_connections()  # what Django runs around every request
    assert claim_task("b", window_seconds=60) is not None
    assert set(claims()) == {"a", "b"}


def test_a_broken_transaction_is_refused_before_sending() -> None:
    with transaction.atomic():
        transaction.set_rollback(True)
        with pytest.raises(TransactionManagementError):
            claim_task("k", window_seconds=60)
    assert claims() == {}


def test_execute_wrappers_see_the_statements() -> None:
    seen: list[str] = []

    def spy(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(spy):
        claim_hold_release()
    assert len(seen) == 3
    assert all("taskclaim.claim" in sql for sql in seen)


def test_the_query_log_records_the_statements() -> None:
    with CaptureQueriesContext(connection) as queries:
        claim_hold_release()
    assert len(queries) == 3
    assert "INSERT INTO taskclaim.claim" in queries[0]["sql"]


@override_settings(DEBUG=True)
def test_debug_logs_the_statements() -> None:
    connection.queries_log.clear()
    claim_task("k", window_seconds=60)
    assert any("INSERT INTO taskclaim.claim" in query["sql"] for query in connection.queries)


@pytest.mark.usefixtures("fresh_connection")
def test_statements_seen_by_execute_wrappers_are_still_prepared() -> None:
    seen: list[str] = []

    def spy(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(spy):
        claim_hold_release()
        claim_hold_release()
    assert len(seen) == 6
    assert len(prepared()) == 3


def test_the_connector_runs_a_shipped_file_and_counts_the_rows_it_changed() -> None:
    insert_claim("old", seconds=-1)
    claim_task("new", window_seconds=60)
    connector = statements.Connector("default")
    assert connector.execute("taskclaim/delete_expired_batch.sql", {"batch_size": 10}) == 1
    assert set(claims()) == {"new"}
    assert repr(connector) == "<Connector 'default'>"
