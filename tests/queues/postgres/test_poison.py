"""PostgresQueue against rows no producer writes but the table admits (an
attempt count at the integer's end, 'infinity' times) and rows the
database refuses to lease: the queue keeps serving the other messages."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator

import pytest
from django.db import connection, connections, transaction

from astral_taskclaim.consumer.summary import WorkerStats
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.queues.postgres.models import QueueMessage
from astral_taskclaim.tasks import TaskRegistry
from astral_taskclaim.worker.loop import Worker

from .pgqueue import MakeQueue

pytestmark = pytest.mark.django_db(transaction=True)

INT_MAX = 2_147_483_647

# Refuses to lease (or, with `every_update`, to change at all) the message
# whose id is in taskclaim_test.poison: the database's own error, raised on
# that row only.
POISON_TRIGGER = """
CREATE TABLE IF NOT EXISTS taskclaim_test_poison (id bigint PRIMARY KEY, every_update boolean);
CREATE OR REPLACE FUNCTION taskclaim_test_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT FROM taskclaim_test_poison AS p
             WHERE p.id = OLD.id AND (p.every_update OR NEW.lease IS NOT NULL)) THEN
    RAISE EXCEPTION 'corrupt row %', OLD.id USING ERRCODE = 'numeric_value_out_of_range';
  END IF;
  RETURN NEW;
END;
$$;
CREATE TRIGGER taskclaim_test_poison BEFORE UPDATE ON taskclaim.message
FOR EACH ROW EXECUTE FUNCTION taskclaim_test_poison();
"""
DROP_POISON_TRIGGER = """
DROP TRIGGER IF EXISTS taskclaim_test_poison ON taskclaim.message;
DROP FUNCTION IF EXISTS taskclaim_test_poison();
DROP TABLE IF EXISTS taskclaim_test_poison;
"""


@pytest.fixture
def poison() -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute(DROP_POISON_TRIGGER)
        cursor.execute(POISON_TRIGGER)
    yield
    with connection.cursor() as cursor:
        cursor.execute(DROP_POISON_TRIGGER)


def add(queue: PostgresQueue, n: int, **columns: object) -> int:
    """Message ``{"n": n}`` of ``queue``, due now unless ``columns`` say."""
    names = ["queue", "body", *columns]
    values = [queue.queue_name, json.dumps({"n": n}), *columns.values()]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO taskclaim.message ({', '.join(names)}) "  # names from this module
            f"VALUES ({', '.join(['%s'] * len(values))}) RETURNING id",
            values,
        )
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def poison_row(message_id: int, *, every_update: bool = False) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO taskclaim_test_poison VALUES (%s, %s)", [message_id, every_update]
        )


def visible_at(message_id: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT visible_at::text FROM taskclaim.message WHERE id = %s", [message_id])
        row = cursor.fetchone()
    assert row is not None
    return str(row[0])


def quarantined(caplog: pytest.LogCaptureFixture) -> list[object]:
    return [
        getattr(r, "message_id", None)
        for r in caplog.records
        if getattr(r, "event", "") == "queue.message_quarantined"
    ]


def test_a_message_at_the_largest_attempt_count_is_received_with_the_rest(
    make_queue: MakeQueue,
) -> None:
    queue = make_queue()
    add(queue, 1, attempts=INT_MAX, visible_at="-infinity")
    add(queue, 2)

    batch = queue.receive(max_messages=10)

    assert [(m.body, m.attempts) for m in batch.messages] == [({"n": 1}, INT_MAX), ({"n": 2}, 1)]


def test_messages_at_infinity_never_come_and_do_not_break_waiting(
    make_queue: MakeQueue,
) -> None:
    queue = make_queue(poll_interval=0.05, listen=False)
    add(queue, 1, visible_at="infinity")

    assert queue.receive(max_messages=10, wait_seconds=0.2).messages == []
    add(queue, 2, visible_at="294276-01-01 00:00:00+00")
    assert queue.receive(max_messages=10, wait_seconds=0.2).messages == []
    add(queue, 3, visible_at="-infinity")
    assert [m.body for m in queue.receive(max_messages=10, wait_seconds=0.2).messages] == [{"n": 3}]


@pytest.mark.usefixtures("empty_claims")
def test_a_burst_worker_drains_a_queue_holding_a_message_at_infinity(
    make_queue: MakeQueue,
) -> None:
    queue = make_queue(poll_interval=0.05, listen=False)
    add(queue, 1, visible_at="infinity")
    task = TaskRegistry().task(queue="jobs")(lambda task: None)
    worker = Worker("jobs", task=task, backend=queue, wait=0.2, burst=True)
    outcome: list[WorkerStats] = []

    def run() -> None:
        try:
            outcome.append(worker.run())
        finally:
            connections.close_all()  # this thread's

    running = threading.Thread(target=run)

    running.start()
    running.join(timeout=30)  # a worker stuck on a failing query would loop for ever
    worker.stop()
    running.join()

    assert [(s.batches, s.received, s.database_errors) for s in outcome] == [(0, 0, 0)]


@pytest.mark.usefixtures("poison")
def test_a_message_that_cannot_be_leased_is_parked_once_and_the_rest_served(
    make_queue: MakeQueue, caplog: pytest.LogCaptureFixture
) -> None:
    queue = make_queue()
    first, bad, last = add(queue, 1), add(queue, 2), add(queue, 3)
    poison_row(bad)

    with caplog.at_level(logging.ERROR, logger="astral_taskclaim.queues.postgres"):
        batch = queue.receive(max_messages=10)
        add(queue, 4)
        again = queue.receive(max_messages=10)
        other = make_queue(queue_name=queue.queue_name).receive(max_messages=10)

    assert [m.id for m in batch.messages] == [str(first), str(last)]
    assert [m.body for m in again.messages] == [{"n": 4}]
    assert other.messages == []
    assert quarantined(caplog) == [bad]
    assert f"message {bad} cannot be received" in caplog.text
    assert "parked with visible_at 'infinity'" in caplog.text
    assert visible_at(bad) == "infinity"


@pytest.mark.usefixtures("poison")
def test_a_message_that_cannot_even_be_parked_is_skipped_by_the_consumer(
    make_queue: MakeQueue, caplog: pytest.LogCaptureFixture
) -> None:
    queue = make_queue()
    bad, good = add(queue, 1), add(queue, 2)
    poison_row(bad, every_update=True)

    with caplog.at_level(logging.ERROR, logger="astral_taskclaim.queues.postgres"):
        batch = queue.receive(max_messages=1)
        add(queue, 3)
        again = queue.receive(max_messages=10)

    assert [m.id for m in batch.messages] == [str(good)]
    assert [m.body for m in again.messages] == [{"n": 3}]
    assert quarantined(caplog) == [bad]
    assert "skipped by this consumer" in caplog.text
    assert visible_at(bad) != "infinity"


@pytest.mark.usefixtures("poison")
def test_quarantine_inside_a_transaction_leaves_it_usable(
    make_queue: MakeQueue, caplog: pytest.LogCaptureFixture
) -> None:
    queue = make_queue()
    bad, good = add(queue, 1), add(queue, 2)
    poison_row(bad)

    with caplog.at_level(logging.ERROR), transaction.atomic():
        batch = queue.receive(max_messages=10)
        later = add(queue, 3)  # the transaction still works

    assert [m.id for m in batch.messages] == [str(good)]
    assert quarantined(caplog) == [bad]
    assert visible_at(bad) == "infinity"
    assert visible_at(later) != "infinity"  # committed


def test_the_message_model_loads_rows_at_infinity(make_queue: MakeQueue) -> None:
    queue = make_queue()
    add(queue, 1, visible_at="infinity")
    add(queue, 2, visible_at="-infinity")

    messages = QueueMessage.objects.for_queue(queue.queue_name)

    by_body = {m.payload["n"]: m.visible_at for m in messages}
    assert (by_body[1].year, by_body[2].year) == (9999, 1)
    assert [m.payload["n"] for m in messages.ready()] == [2]
