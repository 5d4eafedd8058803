"""Workers, the Django Tasks backend, the async API and the outbox relay
through PgBouncer in transaction mode: claimed and bulk enqueues run, the
PostgreSQL queue polls (``LISTEN`` cannot pass), results are stored."""

from __future__ import annotations

import io
import json
import logging
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from astral_taskclaim import aclaim_task, aenqueue_claimed
from astral_taskclaim.claims.async_api import aclose_connections
from astral_taskclaim.claims.bulk import enqueue_claimed_many
from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.queues import create_queue, queues
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks import registry
from astral_taskclaim.tasks_backend.compat import TaskResultStatus
from astral_taskclaim.worker.loop import Worker
from tests.aiokit import run
from tests.queues.cloudflare_server import CloudflareQueuesServer
from tests.queues.servers import CloudflareOutbox
from tests.tasks_backend import jobs

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

ran: list[Any] = []


@pytest.fixture
def jobs_queue() -> Iterator[PostgresQueue]:
    """Queue ``jobs`` (PostgreSQL, default options) with a task that records its runs."""
    name = f"pgbouncer-{uuid.uuid4().hex}"
    backend = "astral_taskclaim.queues.postgres.PostgresQueue"
    config = {"jobs": {"BACKEND": backend, "OPTIONS": {"queue_name": name, "poll_interval": 0.2}}}
    ran.clear()
    with override_settings(TASKCLAIM_QUEUES=config):
        registry.task(queue="jobs", name="tests.pgbouncer.jobs")(ran.append)
        try:
            queue = queues["jobs"]
            assert isinstance(queue, PostgresQueue)
            yield queue
        finally:
            registry.unregister("jobs")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [name])


def test_claimed_and_bulk_enqueues_are_run_by_a_burst_worker(jobs_queue: PostgresQueue) -> None:
    assert enqueue_claimed(jobs_queue, "one", {"n": 0}, window_seconds=60) is not None
    assert enqueue_claimed(jobs_queue, "one", {"n": 0}, window_seconds=60) is None
    enqueue_claimed_many(jobs_queue, [(f"k{n}", {"n": n}) for n in range(1, 50)], window_seconds=60)
    out = io.StringIO()
    call_command("consume_claimed", "jobs", "--burst", "--wait", "0", stdout=out, stderr=out)
    assert sorted(task["n"] for task in ran) == list(range(50))


def test_a_waiting_worker_polls_and_runs_a_message_sent_later(
    jobs_queue: PostgresQueue, caplog: pytest.LogCaptureFixture
) -> None:
    started = threading.Event()
    worker = Worker("jobs", wait=5, max_messages=1)

    def work() -> None:
        started.set()
        try:
            worker.run()
        finally:
            connection.close()

    with caplog.at_level(logging.INFO, logger="astral_taskclaim"):
        thread = threading.Thread(target=work)
        thread.start()
        started.wait()
        enqueue_claimed(jobs_queue, "later", {"n": 1}, window_seconds=60)
        thread.join(60)
    assert not thread.is_alive()
    assert ran == [{"n": 1}]
    assert jobs_queue.listener.backend_pid is None  # never listened
    events = [getattr(record, "event", None) for record in caplog.records]
    assert "queue.listen_pooled" in events
    assert "queue.listen_failed" not in events


def test_a_django_task_runs_and_its_result_is_stored() -> None:
    jobs.calls.clear()
    result = jobs.add.enqueue(2, b=3)
    assert result.status == TaskResultStatus.READY
    Worker("default", wait=0, burst=True).run()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.task_result")


def test_the_async_api_claims_and_enqueues_through_its_pools(jobs_queue: PostgresQueue) -> None:
    async def claims_and_enqueues() -> tuple[str | None, str | None, str | None]:
        try:
            first = await aclaim_task(f"a{uuid.uuid4()}", window_seconds=60)
            token = await aenqueue_claimed(jobs_queue, "async", {"n": 7}, window_seconds=60)
            again = await aenqueue_claimed(jobs_queue, "async", {"n": 7}, window_seconds=60)
            return first, token, again
        finally:
            await aclose_connections()

    for _ in range(3):  # each loop opens new pooled connections, prepared or not
        first, token, again = run(claims_and_enqueues())
        assert first is not None
        connection.close()
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE taskclaim.claim")
    assert token is not None
    assert again is None


def test_the_outbox_relay_sends_what_was_enqueued(
    cloudflare_outbox: CloudflareOutbox, cloudflare_server: CloudflareQueuesServer
) -> None:
    queue = create_queue(cloudflare_outbox.alias)
    keys = [f"relay:{n}" for n in range(120)]
    enqueue_claimed_many(queue, [(key, {"key": key}) for key in keys], window_seconds=600)
    out = io.StringIO()
    call_command("taskclaim_relay", cloudflare_outbox.alias, "--burst", stdout=out, stderr=out)
    stored = [
        json.loads(m.body)["key"] for m in cloudflare_server.stored(cloudflare_outbox.queue_id)
    ]
    assert sorted(stored) == sorted(keys)
    assert cloudflare_outbox.rows() == []
