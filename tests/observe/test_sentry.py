"""Sentry, with the real sentry-sdk sending to a DSN the test serves: failed
attempts captured with the run's tags in a scope of their own (two failing
runs side by side), the give-ups setting, a run's transaction, a schedule's
check-ins, and the setting's system check."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import sentry_sdk
from django.db import connection
from django.test import override_settings

from astral_taskclaim.checks import check_settings
from astral_taskclaim.claims.bulk import enqueue_claimed_many
from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.consumer.observe import _monitor_config
from astral_taskclaim.queues import queues
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.schedules.schedule import Schedule, cron, every
from astral_taskclaim.schedules.ticker import _send
from astral_taskclaim.tasks import TaskRegistry
from astral_taskclaim.worker.loop import Worker
from tests.observe.servers import Received

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


def work(queue: PostgresQueue, run: Any, **options: Any) -> None:
    concurrency = options.pop("concurrency", 1)
    task = TaskRegistry().task(queue="jobs", name="tests.observed", **options)(run)
    Worker("jobs", task=task, backend=queue, concurrency=concurrency, burst=True, wait=0).run()
    sentry_sdk.flush(10)


def of_type(received: Received, kind: str) -> list[Any]:
    return [item for header, item in received.items if header["type"] == kind]


def test_two_failing_runs_side_by_side_are_captured_each_in_its_own_scope(
    queue: PostgresQueue, sentry: Received
) -> None:
    tokens = enqueue_claimed_many(
        queue, [("k:1", {"id": 1}), ("k:2", {"id": 2})], window_seconds=300
    )
    both_in = threading.Barrier(2, timeout=30)

    def fail(task: Any) -> None:
        sentry_sdk.set_tag("mine", task["id"])
        sentry_sdk.add_breadcrumb(message=f"run {task['id']} started")
        both_in.wait()  # both runs in flight at once, on two threads
        raise RuntimeError(f"run {task['id']} failed")

    work(queue, fail, concurrency=2, max_retries=0)
    # One event a run: the run's own, not the give-up's log record too.
    events = sorted(of_type(sentry, "event"), key=lambda e: e["tags"]["taskclaim.key"])
    assert len(events) == 2
    assert not any("logentry" in event for event in events)
    for id_, (event, token) in enumerate(zip(events, tokens, strict=True), start=1):
        assert event["tags"] == {
            "mine": id_,
            "taskclaim.task": "tests.observed",
            "taskclaim.key": f"k:{id_}",
            "taskclaim.queue": "jobs",
            "taskclaim.attempt": "1",
            "taskclaim.run_id": token,
        } | {k: v for k, v in event["tags"].items() if not k.startswith(("mine", "taskclaim"))}
        [exception] = event["exception"]["values"]
        assert exception["value"] == f"run {id_} failed"
        crumbs = [c.get("message") for c in event["breadcrumbs"]["values"]]
        assert f"run {id_} started" in crumbs
        assert f"run {3 - id_} started" not in crumbs
    # Nothing of a run is left on the worker's own scopes.
    assert "mine" not in sentry_sdk.get_isolation_scope()._tags


def test_with_give_ups_only_a_retried_attempt_is_not_captured_but_traced(
    queue: PostgresQueue, sentry: Received
) -> None:
    enqueue_claimed(queue, "k:1", {"id": 1}, window_seconds=300)

    def fail(task: Any) -> None:
        raise RuntimeError("try again")

    with override_settings(TASKCLAIM_SENTRY={"capture": "give_ups"}):
        task = TaskRegistry().task(queue="jobs", name="tests.observed", max_retries=3)(fail)
        Worker("jobs", task=task, backend=queue, burst=True, wait=0, max_messages=1).run()
        sentry_sdk.flush(10)
    sentry.wait_for(lambda items: of_type(sentry, "transaction"))
    assert of_type(sentry, "event") == []
    [transaction] = of_type(sentry, "transaction")
    assert transaction["transaction"] == "tests.observed"
    assert transaction["contexts"]["trace"]["op"] == "queue.process"
    assert transaction["contexts"]["trace"]["status"] == "internal_error"
    assert transaction["tags"]["taskclaim.outcome"] == "retried"


@pytest.mark.parametrize(("capture", "expected"), [("failures", 2), ("give_ups", 1), (None, 0)])
def test_the_setting_says_which_failed_attempts_are_captured(
    queue: PostgresQueue, sentry: Received, capture: str | None, expected: int
) -> None:
    enqueue_claimed(queue, "k:1", {"id": 1}, window_seconds=300)

    def fail(task: Any) -> None:
        raise RuntimeError("down")

    with override_settings(TASKCLAIM_SENTRY={"capture": capture}):
        task = TaskRegistry().task(queue="jobs", name="tests.observed", max_retries=1)(fail)
        for _ in range(20):  # the retry comes due at once (the delay scale)
            Worker("jobs", task=task, backend=queue, burst=True, wait=0).run()
            if len(of_type(sentry, "transaction")) == 2:
                break
            sentry_sdk.flush(10)
        sentry_sdk.flush(10)
    attempts = [e["tags"]["taskclaim.attempt"] for e in of_type(sentry, "event")]
    assert attempts == ["1", "2"][2 - expected :]


def test_a_schedule_slot_checks_in_and_its_run_closes_the_check_in(
    queue: PostgresQueue, sentry: Received
) -> None:
    task = TaskRegistry().task(queue="jobs", name="tests.observed", window_seconds=60)(print)
    timing = cron("0 3 * * *", zone="Europe/Paris")
    schedule = Schedule(name="Nightly report", timing=timing, target=task, key="n", task={})
    assert _send(schedule, datetime(2026, 1, 1, 2, tzinfo=UTC)) == "enqueued"
    Worker("jobs", task=task, backend=queue, burst=True, wait=0).run()
    sentry_sdk.flush(10)
    sentry.wait_for(lambda items: len(of_type(sentry, "check_in")) == 2)
    started, ended = of_type(sentry, "check_in")
    assert started["monitor_slug"] == ended["monitor_slug"] == "nightly-report"
    assert (started["status"], ended["status"]) == ("in_progress", "ok")
    assert started["check_in_id"] == ended["check_in_id"]
    assert started["monitor_config"]["schedule"] == {"type": "crontab", "value": "0 3 * * *"}
    assert started["monitor_config"]["timezone"] == "Europe/Paris"


def test_monitors_sentry_cannot_express_get_no_config() -> None:
    assert _monitor_config(every(600), 60)["schedule"] == {  # type: ignore[index]
        "type": "interval",
        "value": 10,
        "unit": "minute",
    }
    assert _monitor_config(every(90), 60) is None
    assert _monitor_config(cron("*/10 * * * * *"), 60) is None


@pytest.mark.parametrize(
    "value", [{"capture": "everything"}, {"crons": "yes"}, {"captur": None}, ["failures"]]
)
def test_a_bad_sentry_setting_is_e006(value: object) -> None:
    with override_settings(TASKCLAIM_SENTRY=value):
        [found] = check_settings()
    assert found.id == "astral_taskclaim.E006"
    assert "TASKCLAIM_SENTRY" in found.msg


def test_the_run_transaction_continues_the_trace_of_the_request(
    queue: PostgresQueue, sentry: Received
) -> None:
    with sentry_sdk.start_transaction(name="GET /refresh", op="http.server") as request:
        enqueue_claimed(queue, "k:1", {"id": 1}, window_seconds=300)
    work(queue, lambda task: None)
    sentry.wait_for(lambda items: len(of_type(sentry, "transaction")) == 2)
    [run] = [t for t in of_type(sentry, "transaction") if t["transaction"] == "tests.observed"]
    assert run["contexts"]["trace"]["trace_id"] == request.trace_id
    assert run["contexts"]["trace"]["parent_span_id"] == request.span_id
    assert run["contexts"]["trace"]["status"] == "ok"
    assert run["tags"]["taskclaim.key"] == "k:1"
