"""PostgresQueue: its options and checks, and the service role's grants."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction
from django.test import override_settings
from psycopg import sql

from astral_taskclaim.db import sqlfiles
from astral_taskclaim.queues import create_queue
from astral_taskclaim.queues.postgres import PostgresQueue
from tests.claimkit import raw_connection

from .pgqueue import MakeQueue, rows

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_default_queue_is_postgres_named_after_its_alias() -> None:
    queue = create_queue("default")
    assert isinstance(queue, PostgresQueue)
    assert (queue.queue_name, queue.channel) == ("default", "taskclaim.default")
    assert (queue.visibility_timeout, queue.poll_interval, queue.listen) == (60.0, 2.0, True)
    assert queue.check() == []


@pytest.mark.parametrize(
    ("options", "check_id", "match"),
    [
        ({"visibilty_timeout": 5}, "E014", "unknown option 'visibilty_timeout'"),
        ({"visibility_timeout": 0}, "E013", "visibility_timeout"),
        ({"visibility_timeout": 50_000}, "E013", "visibility_timeout"),
        ({"poll_interval": "1"}, "E013", "poll_interval"),
        ({"listen": "yes"}, "E013", "listen"),
        ({"queue_name": ""}, "E013", "queue_name"),
        ({"queue_name": "q" * 54}, "E013", "54 bytes"),
        ({"database": "nope"}, "E011", "'nope'"),
        ({"database": "sqlite"}, "E011", "not PostgreSQL"),
    ],
)
def test_check_reports_bad_options_and_use_refuses_them(
    options: dict[str, Any], check_id: str, match: str
) -> None:
    queue = PostgresQueue("bad", options=options)
    [message] = queue.check()
    assert message.id == f"astral_taskclaim.{check_id}"
    assert match in message.msg
    assert "TASKCLAIM_QUEUES['bad']" in message.msg
    with pytest.raises(Exception, match="TASKCLAIM_QUEUES"):
        queue.send({"n": 1})


@override_settings(TASKCLAIM_DATABASE="sqlite")
def test_check_warns_when_the_queue_is_not_on_the_claims_database() -> None:
    [message] = PostgresQueue("q", options={"database": "default"}).check()
    assert message.id == "astral_taskclaim.W018"


def test_the_service_role_can_send_receive_and_settle(make_queue: MakeQueue) -> None:
    queue = make_queue()
    role = f"taskclaim_queue_{uuid.uuid4().hex[:12]}"
    ident = sql.Identifier(role)
    with raw_connection() as admin:
        admin.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(ident))
        # The settle statement records claimed-task runs too.
        for path in ("taskclaim/grants.sql", "queue/grants.sql", "runs/grants.sql"):
            admin.execute(sqlfiles.with_roles(path, service_role=role))
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql.SQL("SET ROLE {}").format(ident).as_string())
        queue.send({"n": 1})
        queue.send_many([{"n": 2}])
        one, two = queue.receive(max_messages=2).messages
        one.ack()
        two.retry(delay_seconds=0)
        queue.settle([one, two])
        with (
            pytest.raises(DatabaseError, match="permission denied"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute("TRUNCATE taskclaim.message")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET ROLE")
        with raw_connection() as admin:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(ident))
            admin.execute(sql.SQL("DROP ROLE {}").format(ident))
    assert [json.loads(row["body"]) for row in rows(queue)] == [{"n": 2}]
