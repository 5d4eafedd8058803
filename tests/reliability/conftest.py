"""Fixtures of the reliability tests: clean tables, log capture, worker
processes, the security tests' roles, and the bad-input and audit set-ups.
Their helpers are in ``support.py``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, connections
from django.test import override_settings
from psycopg import sql

from astral_taskclaim.queues.postgres import PostgresQueue
from tests.claimkit import insert_claim
from tests.reliability.audit import AUDIT, DROP_AUDIT
from tests.reliability.badinput import QUEUE, TOKEN
from tests.reliability.processes import Fleet
from tests.reliability.support import ADMIN, ALIAS, DB_PASSWORD, SERVICE, EventLog, execute
from tests.reliability.workerapp.tasks import RUNS_TABLE


@pytest.fixture
def clean_tables() -> Iterator[None]:
    """Empty claim and message tables before and after the test (Django's
    flush does not touch these unmanaged tables)."""
    connection.close_if_unusable_or_obsolete()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE taskclaim.claim, taskclaim.message, taskclaim.follow_up")
    yield
    connection.close()  # the test may have broken or restarted it
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE taskclaim.claim, taskclaim.message, taskclaim.follow_up")


@pytest.fixture
def event_log() -> Iterator[EventLog]:
    """Every ``astral_taskclaim`` log record of the test, DEBUG and up."""
    handler = EventLog()
    logger = logging.getLogger("astral_taskclaim")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


@pytest.fixture
def run_table() -> Iterator[None]:
    """An empty ``reliability_run`` table for the test's worker processes."""
    connection.close_if_unusable_or_obsolete()
    with connection.cursor() as cursor:
        cursor.execute(
            f"""CREATE TABLE IF NOT EXISTS {RUNS_TABLE} (
                  id bigserial PRIMARY KEY,
                  task_id integer NOT NULL,
                  outcome text NOT NULL,
                  pid integer NOT NULL,
                  at timestamptz NOT NULL DEFAULT clock_timestamp())"""
        )
        cursor.execute(f"TRUNCATE {RUNS_TABLE}")
    yield
    connections.close_all()  # the server may have restarted under them
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {RUNS_TABLE}")


@pytest.fixture
def fleet(tmp_path: Path, run_table: None, clean_tables: None) -> Iterator[Fleet]:
    """Worker processes on a fresh queue; killed at the end if still running."""
    made = Fleet(tmp_path)
    yield made
    made.close()


@pytest.fixture(scope="module")
def roles(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """The app migrated again with both roles; the service role may log in
    with a password."""
    with django_db_blocker.unblock():
        database = connection.settings_dict["NAME"]
        for role, login in ((ADMIN, "NOLOGIN"), (SERVICE, "LOGIN")):
            execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
            execute(sql.SQL("CREATE ROLE {} {}").format(sql.Identifier(role), sql.SQL(login)))
        execute(
            sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                sql.Identifier(SERVICE), sql.Literal(DB_PASSWORD)
            )
        )
        execute(
            sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                sql.Identifier(database), sql.Identifier(ADMIN)
            )
        )
        call_command("migrate", "astral_taskclaim", "zero", verbosity=0)
        with override_settings(TASKCLAIM_ADMIN_ROLE=ADMIN, TASKCLAIM_SERVICE_ROLE=SERVICE):
            call_command("migrate", "astral_taskclaim", verbosity=0)
        # A mirror of the test database, so the test cases never flush it
        # (the service role may not truncate Django's tables).
        connections.settings[ALIAS] = {
            **connection.settings_dict,
            "USER": SERVICE,
            "PASSWORD": DB_PASSWORD,
            "TEST": {**connection.settings_dict["TEST"], "MIRROR": "default"},
        }
        try:
            yield
        finally:
            connections[ALIAS].close()
            del connections[ALIAS]
            del connections.settings[ALIAS]
            with override_settings(TASKCLAIM_ADMIN_ROLE=ADMIN, TASKCLAIM_SERVICE_ROLE=SERVICE):
                call_command("migrate", "astral_taskclaim", "zero", verbosity=0)
            call_command("migrate", verbosity=0)  # dependent apps (testapp) too
            for role in (ADMIN, SERVICE):
                execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.fixture
def service(roles: None) -> Iterator[str]:
    """Database alias ``taskclaim_service``, logged in as the service role,
    as ``TASKCLAIM_DATABASE``; empty tables around the test."""
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE taskclaim.claim, taskclaim.message, taskclaim.follow_up")
    with override_settings(TASKCLAIM_DATABASE=ALIAS):
        yield ALIAS
    connections[ALIAS].close()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE taskclaim.claim, taskclaim.message, taskclaim.follow_up")


@pytest.fixture
def populated(clean_tables: None) -> Iterator[None]:
    """A live claim ``k``, an expired claim ``old`` and a queued message."""
    insert_claim("k", seconds=600, token=TOKEN)
    insert_claim("old", seconds=-60)
    PostgresQueue("bad", options={"queue_name": "bad-input"}).send({"queued": True})
    with override_settings(TASKCLAIM_QUEUES=QUEUE):
        yield


@pytest.fixture
def audit(clean_tables: None) -> Iterator[None]:
    """The trigger in place, with an empty record, for the test."""
    with connection.cursor() as cursor:
        cursor.execute(DROP_AUDIT)
        cursor.execute(AUDIT)
    yield
    with connection.cursor() as cursor:
        cursor.execute(DROP_AUDIT)
