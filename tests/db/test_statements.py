"""statements.run: prepared statements on Django's connection, with Django's
connection handling, error classes, hooks and query log."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import (
    InternalError,
    OperationalError,
    ProgrammingError,
    close_old_connections,
    connection,
    transaction,
)
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext, override_settings

from astral_taskclaim import claim_task, hold_task, release_task
from astral_taskclaim.db import statements
from tests.claimkit import (
    claims,
    django_pid,
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


@pytest.mark.usefixtures("fresh_connection")
@pytest.mark.parametrize("health_checks", [True, False], ids=["health_checks", "no_checks"])
def test_a_failed_health_check_reconnects_before_the_statement(
    health_checks: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A persistent connection, as CONN_HEALTH_CHECKS is for: read when it opens.
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", None)
    monkeypatch.setitem(connection.settings_dict, "CONN_HEALTH_CHECKS", health_checks)
    connection.close()  # the next one opens with these settings
    assert claim_task("a", window_seconds=60) is not None
    before = django_pid()
    terminate(before)
    close_old_connections()  # a request starts: the next use is health-checked
    if not health_checks:  # as Django's cursor: the dead connection is used
        with pytest.raises(OperationalError):
            claim_task("b", window_seconds=60)
        close_old_connections()  # the error closes it at the end of that request
    assert claim_task("b", window_seconds=60) is not None
    assert django_pid() != before
    assert set(claims()) == {"a", "b"}


def fails_like_a_claim(run: Callable[[], object]) -> type[BaseException]:
    """Inside ``atomic()``, ``run`` fails in a block without a savepoint
    (the caught error leaves the transaction to be rolled back); the class of
    what the next claim then raises."""
    with restricted_role("SELECT") as role, transaction.atomic():
        set_role(role)
        with (
            pytest.raises(ProgrammingError, match="permission denied"),
            transaction.atomic(savepoint=False),
        ):
            run()
        assert connection.needs_rollback
        try:
            claim_task("next", window_seconds=60)
        except Exception as error:  # whatever it is, compared by the caller
            return type(error)
    raise AssertionError("the claim after the failure ran")


def test_an_error_inside_atomic_breaks_the_transaction_as_djangos_cursor_does() -> None:
    def through_djangos_cursor() -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO taskclaim.claim (key, token, expires_at) "
                "VALUES (%s, gen_random_uuid(), now())",
                ["k"],
            )

    assert fails_like_a_claim(through_djangos_cursor) is TransactionManagementError
    assert fails_like_a_claim(lambda: claim_task("k", window_seconds=60)) is (
        TransactionManagementError
    )
    assert claims() == {}


def test_an_error_caught_inside_atomic_leaves_the_transaction_aborted_as_djangos_does() -> None:
    with restricted_role("SELECT") as role, transaction.atomic():
        set_role(role)
        with pytest.raises(ProgrammingError):
            claim_task("k", window_seconds=60)
        # PostgreSQL refuses the rest of the transaction; Django's error for it.
        with pytest.raises(InternalError, match="current transaction is aborted"):
            claim_task("other", window_seconds=60)
        with pytest.raises(InternalError, match="current transaction is aborted"):
            django_pid()
        transaction.set_rollback(True)
    assert claims() == {}
