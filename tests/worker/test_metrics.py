"""Prometheus metrics: a worker's counters and run durations, queue depths, claims."""

from __future__ import annotations

import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import RequestFactory, override_settings
from prometheus_client import generate_latest

from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.queues import queues
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks import ClaimedTask
from astral_taskclaim.worker.loop import Worker
from astral_taskclaim.worker.metrics import metrics_view, serve, worker_registry
from tests.claimkit import insert_claim

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


@pytest.fixture
def jobs() -> Iterator[PostgresQueue]:
    config = {
        "jobs": {
            "BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue",
            "OPTIONS": {"queue_name": "metrics-test"},
        }
    }
    with override_settings(TASKCLAIM_QUEUES=config):
        queue = queues["jobs"]
        assert isinstance(queue, PostgresQueue)
        yield queue
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = 'metrics-test'")


def run(task: Any) -> None:
    if task == "bad":
        raise RuntimeError("boom")


def make_task() -> ClaimedTask[Any]:
    options: dict[str, Any] = {"parse": None, "retry_after_ms": None, "window_seconds": None}
    return ClaimedTask(run, queue="jobs", max_retries=1, name="tests.metrics", **options)


def test_a_worker_exposes_its_counters_durations_and_queue_depth(jobs: PostgresQueue) -> None:
    task = ClaimedTask(
        run,
        queue="jobs",
        max_retries=1,
        parse=None,
        retry_after_ms=None,
        name="t",
        window_seconds=None,
    )
    enqueue_claimed(jobs, "good", "ok", window_seconds=60)
    enqueue_claimed(jobs, "bad", "bad", window_seconds=60)
    worker = Worker("jobs", task=task, wait=0, burst=True)
    registry, on_run = worker_registry(worker)
    worker.on_run = on_run
    worker.run()
    text = generate_latest(registry).decode()
    assert 'taskclaim_worker_messages_total{outcome="ok",queue="jobs"} 1.0' in text
    assert 'taskclaim_worker_messages_total{outcome="retried",queue="jobs"} 1.0' in text
    assert 'taskclaim_worker_batches_total{queue="jobs"} 1.0' in text
    assert 'taskclaim_task_run_duration_seconds_count{outcome="ok",queue="jobs"} 1.0' in text
    assert 'taskclaim_queue_messages{queue="jobs",state="delayed"} 1.0' in text
    assert 'taskclaim_queue_messages{queue="jobs",state="ready"} 0.0' in text


def test_a_message_waiting_for_its_task_is_counted(jobs: PostgresQueue) -> None:
    body = {"key": "k", "claim": str(uuid.uuid4()), "windowSeconds": 60, "task": 1}
    jobs.send({**body, "taskName": "tests.deployed_later"})
    worker = Worker("jobs", task=make_task(), wait=0, burst=True)
    registry, worker.on_run = worker_registry(worker)
    worker.run()
    text = generate_latest(registry).decode()
    assert 'taskclaim_worker_unknown_task_messages_total{queue="jobs"} 1.0' in text


def test_the_worker_registry_is_served_over_http(jobs: PostgresQueue) -> None:
    task = ClaimedTask(
        run,
        queue="jobs",
        max_retries=1,
        parse=None,
        retry_after_ms=None,
        name="t",
        window_seconds=None,
    )
    registry, _ = worker_registry(Worker("jobs", task=task, wait=0, burst=True))
    server, thread = serve(registry, 0, "127.0.0.1")
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            body = response.read().decode()
    finally:
        server.shutdown()
        thread.join(10)
    assert 'taskclaim_worker_messages_total{outcome="failed",queue="jobs"} 0.0' in body


def test_the_django_view_gives_queue_depths_and_claims(jobs: PostgresQueue) -> None:
    enqueue_claimed(jobs, "k", 1, window_seconds=60)
    response = metrics_view(RequestFactory().get("/metrics"))
    text = response.content.decode()
    assert response["Content-Type"].startswith("text/plain")
    assert 'taskclaim_queue_messages{queue="jobs",state="ready"} 1.0' in text
    assert 'taskclaim_claims{state="active"} 1.0' in text
    assert 'taskclaim_queue_oldest_message_age_seconds{queue="jobs"}' in text


def test_a_message_waiting_for_a_concurrency_slot_is_counted(jobs: PostgresQueue) -> None:
    task = ClaimedTask(run, queue="jobs", name="tests.metrics", concurrency_limit=1)
    insert_claim("taskclaim-slot:tests.metrics:0", seconds=30)  # the group's one slot, held
    jobs.send({"key": "k", "claim": str(uuid.uuid4()), "windowSeconds": 60, "task": 1})
    worker = Worker("jobs", task=task, wait=0, burst=True)
    registry, worker.on_run = worker_registry(worker)
    worker.run()
    text = generate_latest(registry).decode()
    assert 'taskclaim_worker_concurrency_limited_messages_total{queue="jobs"} 1.0' in text
