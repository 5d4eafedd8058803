"""OpenTelemetry, with its SDK and in-memory exporter: the enqueue's
PRODUCER span, the run's CONSUMER span its child (sync, async side by side,
bulk), a schedule's slot in a trace of its own, and bodies unchanged
without a tracer provider."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from opentelemetry import propagate, trace
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from astral_taskclaim.claims.bulk import enqueue_claimed_many
from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.queues import queues
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.schedules.schedule import Schedule, cron
from astral_taskclaim.schedules.ticker import _send
from astral_taskclaim.tasks import TaskRegistry
from astral_taskclaim.worker.loop import Worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

POSTGRES = "astral_taskclaim.queues.postgres.PostgresQueue"


@pytest.fixture
def queue() -> Iterator[PostgresQueue]:
    name = f"observe-{uuid.uuid4().hex}"
    config = {"jobs": {"BACKEND": POSTGRES, "OPTIONS": {"queue_name": name}}}
    with override_settings(TASKCLAIM_QUEUES=config, TASKCLAIM_DELAY_SCALE=0.0001):
        made = queues["jobs"]
        assert isinstance(made, PostgresQueue)
        yield made
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [name])


def bodies(queue: PostgresQueue) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT body::text FROM taskclaim.message WHERE queue = %s ORDER BY id",
            [queue.queue_name],
        )
        return [row[0] for row in cursor.fetchall()]


def work(queue: PostgresQueue, run: Callable[[Any], object], **options: Any) -> None:
    """Runs the queue's messages until none is left (retries included)."""
    concurrency = options.pop("concurrency", 1)
    task = TaskRegistry().task(queue="jobs", name="tests.observed", **options)(run)
    for _ in range(20):
        Worker("jobs", task=task, backend=queue, concurrency=concurrency, burst=True, wait=0).run()
        if not bodies(queue):
            return
    pytest.fail("messages left")


def named(spans: InMemorySpanExporter, name: str) -> list[Any]:
    return [span for span in spans.get_finished_spans() if span.name == name]


def test_without_a_tracer_provider_bodies_are_the_wire_format_byte_for_byte(
    queue: PostgresQueue,
) -> None:
    # Both SDKs are imported here, neither set up: nothing changes.
    assert "opentelemetry.trace" in sys.modules
    assert "sentry_sdk" in sys.modules
    token = enqueue_claimed(queue, "k:1", {"id": 1}, window_seconds=300)
    [many] = enqueue_claimed_many(queue, [("k:2", {"id": 2})], window_seconds=300)
    assert bodies(queue) == [
        f'{{"key":"k:1","claim":"{token}","windowSeconds":300,"task":{{"id":1}}}}',
        f'{{"key":"k:2","claim":"{many}","windowSeconds":300,"task":{{"id":2}}}}',
    ]


def test_the_run_is_the_child_of_the_enqueue_and_the_enqueue_of_the_request(
    queue: PostgresQueue, spans: InMemorySpanExporter
) -> None:
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("GET /refresh", kind=SpanKind.SERVER) as request:
        token = enqueue_claimed(queue, "k:1", {"id": 1}, window_seconds=300)
    [body] = bodies(queue)
    carried = json.loads(body)["trace"]
    work(queue, lambda task: None)
    [send] = named(spans, "send jobs")
    [process] = named(spans, "process jobs")
    assert send.kind == SpanKind.PRODUCER
    assert process.kind == SpanKind.CONSUMER
    assert send.parent.span_id == request.get_span_context().span_id
    assert process.parent.span_id == send.context.span_id
    assert process.context.trace_id == request.get_span_context().trace_id
    assert carried["traceparent"].split("-")[2] == f"{send.context.span_id:016x}"
    assert send.attributes["messaging.message.id"] == token
    assert (
        dict(process.attributes).items()
        >= {
            "messaging.system": "postgres",
            "messaging.destination.name": "jobs",
            "messaging.operation.type": "process",
            "messaging.message.id": token,
            "taskclaim.key": "k:1",
            "taskclaim.task": "tests.observed",
            "taskclaim.attempt": 1,
            "taskclaim.outcome": "ok",
        }.items()
    )
    assert process.status.status_code == StatusCode.UNSET


def test_a_time_limited_sync_run_is_in_its_span_and_a_timed_out_run_says_so(
    queue: PostgresQueue, spans: InMemorySpanExporter
) -> None:
    enqueue_claimed(queue, "k:1", {"id": 1}, window_seconds=300)
    current: list[int] = []

    def run(task: Any) -> None:  # on a thread of its own: its time limit's
        current.append(trace.get_current_span().get_span_context().span_id)

    work(queue, run, time_limit=30)
    [process] = named(spans, "process jobs")
    assert current == [process.context.span_id]

    spans.clear()
    enqueue_claimed(queue, "k:2", {"id": 2}, window_seconds=300)
    attempts: list[int] = []

    async def hangs_once(task: Any) -> None:
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            await asyncio.Event().wait()  # cancelled at the limit

    work(queue, hangs_once, time_limit=0.2)
    first, second = sorted(
        named(spans, "process jobs"), key=lambda s: s.attributes["taskclaim.attempt"]
    )
    assert first.attributes["taskclaim.outcome"] == "retried"
    assert first.attributes["error.type"] == "TimeLimitExceeded"
    assert first.status.description == "retried: TimeLimitExceeded"
    assert second.attributes["taskclaim.outcome"] == "ok"


def test_each_failed_attempt_has_an_error_status_and_its_exception(
    queue: PostgresQueue, spans: InMemorySpanExporter
) -> None:
    enqueue_claimed(queue, "k:1", {"id": 1}, window_seconds=300)

    def fail(task: Any) -> None:
        raise ValueError("no stock")

    work(queue, fail, max_retries=1)
    attempts = sorted(named(spans, "process jobs"), key=lambda s: s.attributes["taskclaim.attempt"])
    assert [s.attributes["taskclaim.outcome"] for s in attempts] == ["retried", "failed"]
    for span in attempts:
        assert span.status.status_code == StatusCode.ERROR
        [event] = span.events
        assert event.name == "exception"
        assert event.attributes["exception.type"] == "ValueError"
        assert event.attributes["exception.message"] == "no stock"
    [send] = named(spans, "send jobs")
    assert {s.parent.span_id for s in attempts} == {send.context.span_id}


def test_async_runs_side_by_side_each_have_their_own_span_current(
    queue: PostgresQueue, spans: InMemorySpanExporter
) -> None:
    enqueue_claimed_many(queue, [("k:1", {"id": 1}), ("k:2", {"id": 2})], window_seconds=300)
    both_in = asyncio.Event()
    running: set[int] = set()

    async def run(task: Any) -> None:
        running.add(task["id"])
        if len(running) == 2:
            both_in.set()
        await asyncio.wait_for(both_in.wait(), 30)  # both runs in flight at once
        with trace.get_tracer("tests").start_as_current_span(f"inside {task['id']}"):
            await asyncio.sleep(0)

    work(queue, run, concurrency=2)
    [send] = named(spans, "send jobs")
    assert send.attributes["messaging.batch.message_count"] == 2
    runs = {s.attributes["taskclaim.key"]: s for s in named(spans, "process jobs")}
    for id_ in (1, 2):
        [inside] = named(spans, f"inside {id_}")
        assert inside.parent.span_id == runs[f"k:{id_}"].context.span_id
        assert runs[f"k:{id_}"].parent.span_id == send.context.span_id


def test_a_schedule_slot_starts_a_trace_of_its_own(
    queue: PostgresQueue, spans: InMemorySpanExporter
) -> None:
    task = TaskRegistry().task(queue="jobs", name="tests.scheduled", window_seconds=60)(print)
    schedule = Schedule(name="nightly", timing=cron("0 3 * * *"), target=task, key="n", task={})
    with trace.get_tracer("tests").start_as_current_span("a worker's loop"):
        assert _send(schedule, datetime(2026, 1, 1, 3, tzinfo=UTC)) == "enqueued"
    [slot] = named(spans, "schedule nightly")
    [send] = named(spans, "send jobs")
    assert slot.parent is None
    assert send.parent.span_id == slot.context.span_id
    assert slot.attributes["taskclaim.slot"] == "2026-01-01T03:00:00Z"


def test_a_django_task_run_is_the_child_of_its_enqueue(spans: InMemorySpanExporter) -> None:
    from tests.tasks_backend import jobs
    from tests.tasks_backend.running import drain

    tracer = trace.get_tracer("tests")
    try:
        with tracer.start_as_current_span("GET /add", kind=SpanKind.SERVER):
            result = jobs.add.enqueue(2, b=3)
        drain()
        [send] = named(spans, "send default")
        [process] = named(spans, "process default")
        assert send.attributes["taskclaim.task"] == jobs.add.module_path
        assert process.attributes["taskclaim.task"] == jobs.add.module_path
        assert process.attributes["messaging.message.id"] == result.id
        assert process.parent.span_id == send.context.span_id
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM taskclaim.message WHERE queue = 'default'")
            cursor.execute("DELETE FROM taskclaim.task_result")


def test_the_outbox_keeps_the_trace_context_for_the_relay(
    cloudflare_outbox: Any, spans: InMemorySpanExporter
) -> None:
    with trace.get_tracer("tests").start_as_current_span("request"):
        assert enqueue_claimed(queues[cloudflare_outbox.alias], "k:1", {}, window_seconds=60)
    [row] = cloudflare_outbox.rows()
    [send] = named(spans, f"send {cloudflare_outbox.alias}")
    traceparent = json.loads(row)["trace"]["traceparent"]
    assert traceparent.startswith(f"00-{send.context.trace_id:032x}-{send.context.span_id:016x}-")
    assert send.attributes["messaging.system"] == "cloudflare"


def test_a_body_without_a_trace_starts_one_of_its_own(
    queue: PostgresQueue, spans: InMemorySpanExporter
) -> None:
    # As the TypeScript package sends it: the four fields only.
    queue.send({"key": "k:1", "claim": str(uuid.uuid4()), "windowSeconds": 300, "task": {}})
    with trace.get_tracer("tests").start_as_current_span("around the worker"):
        work(queue, lambda task: None)
    [process] = named(spans, "process jobs")
    assert process.parent is None
    assert process.attributes["taskclaim.outcome"] == "ok"


class _Broken(TextMapPropagator):
    """A project's propagator that raises on a body's trace."""

    def extract(self, carrier: Any, context: Any = None, getter: Any = None) -> Any:
        raise RuntimeError("broken propagator")

    def inject(self, carrier: Any, context: Any = None, setter: Any = None) -> None:
        carrier["traceparent"] = "not a traceparent"

    @property
    def fields(self) -> set[str]:
        return {"traceparent"}


def test_a_failing_sdk_is_logged_and_the_run_goes_on(
    queue: PostgresQueue, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    previous = propagate.get_global_textmap()
    propagate.set_global_textmap(_Broken())
    try:
        enqueue_claimed(queue, "k:1", {"id": 1}, window_seconds=300)
        ran: list[Any] = []
        work(queue, ran.append)
    finally:
        propagate.set_global_textmap(previous)
    assert ran == [{"id": 1}]
    [record] = [r for r in caplog.records if getattr(r, "event", None) == "observe.failed"]
    assert record.stage == "start"  # type: ignore[attr-defined]
    assert "broken propagator" in record.getMessage()
