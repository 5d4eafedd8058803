"""Security with the roles configured, secrets, and SQL injection.

- The app migrated with ``TASKCLAIM_ADMIN_ROLE`` and
  ``TASKCLAIM_SERVICE_ROLE``; a second database alias logs in as the
  service role (with a password). Through it the package claims, holds,
  releases and runs the PostgreSQL queue end to end (send, receive with
  LISTEN, settle, bulk enqueue); the same connection cannot run
  ``taskclaim.delete_expired()``, truncate, alter or drop anything, nor
  touch other data.
- No secret (Cloudflare token, AWS keys, the database password) shows in
  any log record, repr or error, across runs that hit every error path.
- SQL is only ever built with parameters (checked in the package source),
  and keys full of quotes, backslashes and ``%`` round-trip.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connections, transaction
from psycopg import errors

from astral_taskclaim.claims.bulk import claim_tasks, enqueue_claimed_many
from astral_taskclaim.claims.claim import claim_task, enqueue_claimed, hold_task, release_task
from astral_taskclaim.claims.maintenance import scrub
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks import ClaimedTask, TaskRegistry
from astral_taskclaim.worker.loop import Worker
from tests.claimkit import claims
from tests.reliability.support import AS_SERVICE, ROOT, SERVICE, record_figures, table_snapshot

pytestmark = pytest.mark.django_db(transaction=True)

# Keys that break SQL built by pasting strings, or %-formatting.
KEYS = [
    "it's",
    'say "hi"',
    "back\\slash\\",
    "100%",
    "%s",
    "%(key)s",
    "{key}",
    "'; DROP TABLE taskclaim.claim; --",
    "$1",
    "tab\there\nnewline",
    "ünïcødé ☕ 😀",
    " spaced ",
]


@AS_SERVICE
def test_the_service_role_claims_holds_releases_and_runs_the_queue(service: str) -> None:
    with connections[service].cursor() as cursor:
        cursor.execute("SELECT current_user")
        assert cursor.fetchone() == (SERVICE,)
    token = claim_task("svc:1", window_seconds=60)
    assert token is not None
    hold_task("svc:1", token, delay_seconds=30, window_seconds=60)
    assert 85 < claims()["svc:1"][1] <= 90
    release_task("svc:1", token)
    assert claims() == {}

    queue = PostgresQueue("svc", options={"queue_name": "svc", "poll_interval": 0.1})
    ran: list[Any] = []
    task: ClaimedTask[Any] = TaskRegistry().task(queue="svc", name="svc", max_retries=0)(
        lambda t: ran.append(t) if t != "fail" else 1 / 0
    )
    assert enqueue_claimed(queue, "svc:a", "a", window_seconds=60)
    with transaction.atomic(using=service):  # claim and message commit together
        assert enqueue_claimed(queue, "svc:b", "b", window_seconds=60)
    assert claim_tasks(["svc:c"], window_seconds=60)[0] is not None
    assert all(enqueue_claimed_many(queue, [("svc:d", "d"), ("svc:e", "fail")], window_seconds=60))
    # Receive (with LISTEN), run, settle, hold and release, all as the service role.
    stats = Worker("svc", task=task, backend=queue, wait=0.5, burst=True, using=service).run()
    assert (stats.received, stats.ok, stats.failed, stats.claim_write_failures) == (4, 3, 1, 0)
    assert sorted(ran) == ["a", "b", "d"]
    assert sorted(claims()) == ["svc:a", "svc:b", "svc:c", "svc:d"]  # svc:e released
    assert table_snapshot()[1] == []


FORBIDDEN = [
    "SELECT taskclaim.delete_expired()",
    "TRUNCATE taskclaim.claim",
    "TRUNCATE taskclaim.message",
    "ALTER TABLE taskclaim.claim ADD COLUMN extra int",
    "ALTER TABLE taskclaim.message DISABLE TRIGGER message_notify",
    "DROP TABLE taskclaim.message",
    "DROP INDEX taskclaim.claim_expires_at_idx",
    "DROP FUNCTION taskclaim.delete_expired()",
    "CREATE TABLE taskclaim.other (id int)",
    "CREATE FUNCTION slug.slug(name text, extra int) RETURNS text LANGUAGE sql RETURN name",
    "CREATE OR REPLACE FUNCTION slug.slug(name text) RETURNS text LANGUAGE sql RETURN name",
    "ALTER TABLE taskclaim.claim OWNER TO CURRENT_USER",
    "DELETE FROM auth_user",
    "UPDATE django_migrations SET name = 'x'",
    "SELECT * FROM auth_user",
]


@AS_SERVICE
@pytest.mark.parametrize("statement", FORBIDDEN)
def test_the_service_role_cannot(service: str, statement: str) -> None:
    claim_task("svc:kept", window_seconds=60)
    before = table_snapshot()
    with pytest.raises(DatabaseError) as raised, connections[service].cursor() as cursor:
        cursor.execute(statement)
    assert isinstance(raised.value.__cause__, errors.InsufficientPrivilege)
    assert table_snapshot() == before


@AS_SERVICE
def test_the_service_role_cannot_scrub(service: str) -> None:
    claim_task("svc:kept", window_seconds=60)
    before = table_snapshot()
    with pytest.raises(DatabaseError, match="permission denied"):
        scrub(using=service)
    with pytest.raises((CommandError, DatabaseError), match="permission denied"):
        call_command("taskclaim_scrub", "--no-input", "--database", service)
    assert table_snapshot() == before


@pytest.mark.usefixtures("clean_tables")
def test_keys_with_quotes_backslashes_and_percent_round_trip() -> None:
    queue = PostgresQueue("keys", options={"queue_name": "keys"})
    tokens = {key: enqueue_claimed(queue, key, {"key": key}, window_seconds=60) for key in KEYS}
    assert {key: token for key, (token, _) in claims().items()} == tokens
    for key, token in tokens.items():
        assert token is not None
        hold_task(key, token, delay_seconds=1, window_seconds=60)
    assert claim_tasks(KEYS, window_seconds=60) == [None] * len(KEYS)
    ran: list[Any] = []
    task: ClaimedTask[Any] = TaskRegistry().task(queue="keys", name="keys", max_retries=0)(
        ran.append
    )
    Worker("keys", task=task, backend=queue, wait=0, burst=True).run()
    assert sorted(t["key"] for t in ran) == sorted(KEYS)
    for key, token in tokens.items():
        release_task(key, token)  # type: ignore[arg-type]
    assert claims() == {}
    assert enqueue_claimed_many(queue, [(key, {}) for key in KEYS], window_seconds=60)
    assert sorted(claims()) == sorted(KEYS)
    record_figures("sql_keys", keys=len(KEYS), round_trips=4 * len(KEYS))


def _string_built(node: ast.AST) -> bool:
    """An f-string, a ``%`` or ``+`` on a str literal, or ``"...".format()``."""
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod | ast.Add):
        return any(
            isinstance(side, ast.JoinedStr)
            or (isinstance(side, ast.Constant) and isinstance(side.value, str))
            for side in (node.left, node.right)
        )
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
    )


# The one concatenation allowed: EXPLAIN in front of SQL Django compiled
# (with its parameters passed on separately).
ALLOWED = {'"EXPLAIN (FORMAT JSON) " + statement'}


def test_sql_is_never_built_from_strings() -> None:
    """Every ``execute(...)`` in the package gets SQL from a package file or
    psycopg's ``sql`` composition, never a string put together in Python."""
    found = []
    calls = 0
    for path in sorted((ROOT / "astral_taskclaim").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"execute", "executemany"}
                and node.args
            ):
                calls += 1
                argument = node.args[0]
                if (
                    _string_built(argument)
                    and ast.get_source_segment(source, argument) not in ALLOWED
                ):
                    found.append(f"{Path(path).relative_to(ROOT)}:{node.lineno}")
    assert calls >= 10
    assert found == []
