"""One trace from a Django view that enqueues to the run in a worker
process, read back from an OTLP/HTTP collector the test serves: on the
PostgreSQL queue and on SQS (moto)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client, override_settings
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from tests.observe.servers import Received
from tests.queues.servers import MotoSQS
from tests.workerkit import WorkerGroup, postgres_queues

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("empty_claims"),
    pytest.mark.slow,
]

# The protobuf's enum values of Span.SpanKind.
SERVER, PRODUCER, CONSUMER = 2, 4, 5


def request_to_run(tmp_path: Path, otlp: tuple[str, Received], queues_json: str) -> None:
    url, received = otlp
    with override_settings(TASKCLAIM_QUEUES=json.loads(queues_json)):
        view = "tests.observe.urls"
        with override_settings(ROOT_URLCONF=view):
            tracer = trace.get_tracer("tests")
            with tracer.start_as_current_span("GET /refresh/", kind=SpanKind.SERVER):
                log = str(tmp_path / "runs.jsonl")
                response = Client().get("/refresh/", {"id": 1, "log": log})
            assert response.status_code == 202
    group = WorkerGroup(tmp_path, "tests.observe.settings", f"observe-{uuid.uuid4().hex[:8]}")
    env = {"TASKCLAIM_E2E_QUEUES": queues_json, "TASKCLAIM_OBSERVE_OTLP": url}
    worker = group.start("e2e", "--burst", env=env)
    try:
        assert worker.wait() == 0, worker.output()
    finally:
        group.close()
    spans = received.wait_for(lambda items: any(s["kind"] == CONSUMER for s in items))
    [server] = [s for s in spans if s["kind"] == SERVER]
    [send] = [s for s in spans if s["kind"] == PRODUCER]
    [run] = [s for s in spans if s["kind"] == CONSUMER]
    assert (server["service"], send["service"], run["service"]) == ("web", "web", "worker")
    assert server["trace_id"] == send["trace_id"] == run["trace_id"]
    assert send["parent_span_id"] == server["span_id"]
    assert run["parent_span_id"] == send["span_id"]
    assert run["attributes"]["messaging.message.id"] == response.content.decode()
    assert run["attributes"]["taskclaim.outcome"] == "ok"
    assert run["attributes"]["taskclaim.key"] == "e2e:1"


def test_one_trace_from_the_view_to_the_run_on_postgresql(
    tmp_path: Path, otlp: tuple[str, Received]
) -> None:
    name = f"observe-{uuid.uuid4().hex}"
    try:
        request_to_run(tmp_path, otlp, postgres_queues("e2e", {"queue_name": name}))
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [name])


def test_one_trace_from_the_view_to_the_run_on_sqs(
    tmp_path: Path, otlp: tuple[str, Received], moto_sqs: MotoSQS
) -> None:
    options: dict[str, Any] = moto_sqs.options(moto_sqs.create_queue())
    backend = "astral_taskclaim.queues.sqs.SQSQueue"
    request_to_run(tmp_path, otlp, json.dumps({"e2e": {"BACKEND": backend, "OPTIONS": options}}))
