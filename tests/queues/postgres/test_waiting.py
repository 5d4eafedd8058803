"""PostgresQueue: an idle receive waits on LISTEN/NOTIFY, on the next
delayed message, or polls."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest
from django.db import connection
from psycopg import sql

from astral_taskclaim.queues import MessageBatch
from astral_taskclaim.queues.postgres import PostgresQueue
from tests.claimkit import raw_connection

from .pgqueue import MakeQueue

pytestmark = pytest.mark.django_db(transaction=True)


def wait_for_listener(channel: str) -> None:
    """Blocks until some session has run ``LISTEN`` on ``channel``."""
    with raw_connection() as observer:
        while not observer.execute(
            "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE query = %s)",
            [sql.SQL("LISTEN {}").format(sql.Identifier(channel)).as_string(observer)],
        ).fetchone()[0]:  # type: ignore[index]
            observer.execute("SELECT pg_sleep(0.01)")


def receive_woken_by(queue: PostgresQueue, action: Callable[[], object]) -> MessageBatch:
    """``queue.receive`` (waiting up to 120 s) while another thread runs
    ``action`` once the receive listens; fails unless the batch came well
    within the wait, which only a NOTIFY can deliver."""

    def act_once_listening() -> None:
        wait_for_listener(queue.channel)
        action()
        connection.close()

    actor = threading.Thread(target=act_once_listening)
    started = time.monotonic()
    actor.start()
    batch = queue.receive(max_messages=1, wait_seconds=120)
    actor.join()
    assert time.monotonic() - started < 30
    return batch


def test_an_idle_receive_wakes_on_notify(make_queue: MakeQueue) -> None:
    # Polling every 60 s: only the trigger's NOTIFY can deliver within the bound.
    queue = make_queue(poll_interval=60)
    producer = PostgresQueue("pg", options={"queue_name": queue.queue_name})
    batch = receive_woken_by(queue, lambda: producer.send({"n": 1}))
    assert [m.body for m in batch.messages] == [{"n": 1}]


def test_a_retry_due_at_once_wakes_an_idle_receive(make_queue: MakeQueue) -> None:
    # The message is leased for 60 s and polling is every 60 s: only the
    # NOTIFY of the settle that retries it can deliver it within the bound.
    queue = make_queue(poll_interval=60, visibility_timeout=60)
    queue.send({"n": 1})
    [leased] = queue.receive(max_messages=1).messages
    waiting = PostgresQueue("pg", options={"queue_name": queue.queue_name, "poll_interval": 60})

    def retry() -> None:
        leased.retry(delay_seconds=0)
        queue.settle([leased])

    batch = receive_woken_by(waiting, retry)
    waiting.close()
    assert [m.body for m in batch.messages] == [{"n": 1}]
    assert [m.attempts for m in batch.messages] == [2]


def test_an_idle_receive_wakes_when_a_delayed_message_is_due(make_queue: MakeQueue) -> None:
    queue = make_queue(poll_interval=60)
    queue.send({"n": 1}, delay_seconds=0.5)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT visible_at FROM taskclaim.message WHERE queue = %s", [queue.queue_name]
        )
        due = cursor.fetchone()[0]
    started = time.monotonic()
    [message] = queue.receive(max_messages=1, wait_seconds=120).messages
    assert time.monotonic() - started < 30
    with connection.cursor() as cursor:
        cursor.execute("SELECT leased_at FROM taskclaim.message WHERE id = %s", [int(message.id)])
        assert cursor.fetchone()[0] >= due  # not delivered before its delay


def test_without_listen_a_receive_polls(make_queue: MakeQueue) -> None:
    queue = make_queue(listen=False, poll_interval=0.05)
    producer = PostgresQueue("pg", options={"queue_name": queue.queue_name})
    ready = threading.Event()

    def send() -> None:
        ready.wait()
        producer.send({"n": 1})
        connection.close()

    sender = threading.Thread(target=send)
    sender.start()
    ready.set()
    batch = queue.receive(max_messages=1, wait_seconds=60)
    sender.join()
    assert [m.body for m in batch.messages] == [{"n": 1}]
    assert queue.listener.backend_pid is None


def test_a_broken_listen_connection_falls_back_to_polling(
    make_queue: MakeQueue, caplog: pytest.LogCaptureFixture
) -> None:
    queue = make_queue(poll_interval=0.05)
    assert queue.receive(max_messages=1, wait_seconds=0.01).messages == []
    pid = queue.listener.backend_pid
    assert pid is not None
    with raw_connection() as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 10000)", [pid])
    queue.send({"n": 1}, delay_seconds=0.3)
    with caplog.at_level(logging.WARNING, logger="astral_taskclaim"):
        [message] = queue.receive(max_messages=1, wait_seconds=60).messages
    assert message.body == {"n": 1}
    assert "queue.listen_failed" in [r.event for r in caplog.records]  # type: ignore[attr-defined]
    # The next waiting receive listens again.
    assert queue.receive(max_messages=1, wait_seconds=0.01).messages == []
    assert queue.listener.backend_pid not in (None, pid)


def test_a_listener_closed_by_another_thread_makes_the_receive_poll(
    make_queue: MakeQueue,
) -> None:
    """A ``--concurrency`` lane that reconnects closes the queue's
    connections, the listener's too, while the main thread's receive waits
    on it: the wait says so (the receive polls) instead of failing."""
    queue = make_queue(poll_interval=0.05)
    assert queue.listener.start()
    queue.listener.close()  # as the lane's reconnect does
    assert queue.listener.wait(0.01) is False
    queue.send({"n": 1})
    assert [m.body for m in queue.receive(max_messages=1, wait_seconds=5).messages] == [{"n": 1}]
