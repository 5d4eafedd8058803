"""The lease's commit: in autocommit it does not wait for the WAL flush
(``synchronous_commit`` off for that transaction alone); inside a caller's
transaction, and for settlements, durability is left as configured."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from tests.commitkit import commit_settings

from .pgqueue import MakeQueue, rows

pytestmark = pytest.mark.django_db(transaction=True)


def session_setting() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return str(cursor.fetchone()[0])


def test_a_lease_in_autocommit_commits_without_waiting_a_settlement_waits(
    make_queue: MakeQueue,
) -> None:
    queue = make_queue()
    queue.send_many([{"n": n} for n in range(3)])
    with commit_settings("taskclaim.message") as noted:
        messages = queue.receive(max_messages=3).messages
        leases = noted()
        for message in messages:
            message.ack()
        queue.settle(messages)
        settlements = noted()[len(leases) :]
    assert leases == [("message", "UPDATE", "off")] * 3
    assert settlements == [("message", "DELETE", "on")] * 3
    assert session_setting() == "on"  # the next transaction waits again
    assert rows(queue) == []


def test_a_lease_inside_a_transaction_leaves_its_commit_alone(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.send({"n": 1})
    with commit_settings("taskclaim.message") as noted:
        with transaction.atomic():
            [message] = queue.receive(max_messages=1).messages
            queue.send({"n": 2})  # the caller's own write commits durably with it
        assert noted() == [("message", "UPDATE", "on"), ("message", "INSERT", "on")]
    assert message.body == {"n": 1}
    assert session_setting() == "on"
