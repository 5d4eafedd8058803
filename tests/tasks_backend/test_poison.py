"""Odd, forged and fatal Django Task messages: each is settled with its
reason, and the worker goes on to the healthy runs behind it."""

from __future__ import annotations

import logging
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from astral_taskclaim.queues import queues
from astral_taskclaim.tasks_backend import results
from astral_taskclaim.tasks_backend.compat import TaskResultStatus, task_finished

from . import jobs
from .running import claims, drain, make_due, message_rows

pytestmark = pytest.mark.usefixtures("fast_backoff")

BROKEN_MODULE = "tests.tasks_backend.import_raises"
FAILURES = "astral_taskclaim.consumer.failures"


@pytest.fixture
def fast_backoff() -> Iterator[None]:
    with override_settings(TASKCLAIM_DELAY_SCALE=0.001):
        yield


@pytest.fixture
def worker_handlers() -> Iterator[None]:
    """SIGINT handled as ``consume_claimed``'s handlers do."""
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def sent(body: dict[str, Any]) -> None:
    queues["default"].send(body)


def body_of(result: Any) -> dict[str, Any]:
    """The queued message body of run ``result``."""
    [body] = [row[0] for row in message_rows() if row[0]["claim"] == result.id]
    return dict(body)


def forged(task: dict[str, Any]) -> dict[str, Any]:
    """A body of no stored run, under a fresh id."""
    token = str(uuid.uuid4())
    return {"key": f"forged:{token}", "claim": token, "windowSeconds": 1, "task": task}


def events(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if getattr(record, "event", None) == name]


ODD_RUN_AFTER = ["2030-01-01T00:00:00", "2024-02-30T00:00:00Z", "2024-01-01T25:00:00Z", "soon", 7]


def test_odd_messages_are_malformed_and_the_healthy_run_behind_them_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    odd_run_after = jobs.add.enqueue(5, 5)
    template = body_of(odd_run_after)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message")
    for value in ODD_RUN_AFTER:
        sent({**template, "task": {**template["task"], "runAfter": value}})
    for path in [".x", "...", f"{BROKEN_MODULE}.task", "os.system"]:
        sent(forged({"taskPath": path, "args": ["echo hi"], "kwargs": {}}))
    healthy = jobs.add.enqueue(1, 2)

    stats = drain()

    assert (stats.malformed, stats.ok) == (len(ODD_RUN_AFTER) + 4, 1)
    assert jobs.calls == [("add", 1, 2)]
    healthy.refresh()
    assert healthy.return_value == 3
    odd_run_after.refresh()
    assert odd_run_after.status == TaskResultStatus.READY  # a forged body must not fail it
    assert BROKEN_MODULE not in sys.modules  # nothing a message names is imported
    reasons = [record.reason for record in events(caplog, "queue.message_malformed")]  # type: ignore[attr-defined]
    assert sum("runAfter" in reason for reason in reasons) == len(ODD_RUN_AFTER)
    assert sum("no task result" in reason for reason in reasons) == 4
    assert message_rows() == []


@pytest.mark.parametrize(
    "change",
    [
        {"taskPath": jobs.record.module_path},
        {"args": ["forged"]},
        {"kwargs": {"b": 1}},
        {"taskPath": f"{BROKEN_MODULE}.task"},
    ],
)
def test_a_forged_message_naming_a_real_run_runs_nothing_and_leaves_the_run_alone(
    change: dict[str, Any],
) -> None:
    result = jobs.add.enqueue(2, 3)
    body = body_of(result)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message")
    sent({**body, "task": {**body["task"], **change}})
    assert drain().malformed == 1
    assert jobs.calls == []
    result.refresh()
    assert (result.status, result.attempts, result.errors) == (TaskResultStatus.READY, 0, [])
    assert BROKEN_MODULE not in sys.modules
    sent(body)  # the real message still runs the stored task and arguments
    assert drain().ok == 1
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 5)


def test_a_forged_message_after_the_run_finished_is_refused_too() -> None:
    result = jobs.add.enqueue(2, 3)
    body = body_of(result)
    drain()
    sent({**body, "task": {**body["task"], "args": [40, 2]}})
    assert drain().malformed == 1
    result.refresh()
    assert result.return_value == 5
    assert jobs.calls == [("add", 2, 3)]


def test_an_unknown_task_is_sent_again_until_it_is_deployed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = "tests.tasks_backend.not_deployed_yet.add"
    result = jobs.add.enqueue(1, 1)
    body = body_of(result)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message")
        cursor.execute("UPDATE taskclaim.task_result SET task_path = %s", [path])
    sent({**body, "task": {**body["task"], "taskPath": path}})

    assert drain(max_messages=1).retried == 1
    [(resent, *_rest, attempts)] = message_rows()
    assert (resent["task"]["taskPath"], attempts) == (path, 0)  # a new message
    [unknown] = events(caplog, "queue.task_unknown")
    assert "not_deployed_yet" in unknown.getMessage()
    stored = results.fetch("default", result.id)
    assert stored.status == "READY"
    assert (
        stored.errors[0]["exception_class_path"]
        == "astral_taskclaim.consumer.failures.TaskNotFound"
    )

    results._known_tasks[path] = jobs.add  # the new code is deployed
    try:
        make_due()
        assert drain().ok == 1
    finally:
        del results._known_tasks[path]
    assert jobs.calls == [("add", 1, 1)]
    assert results.fetch("default", result.id).status == "SUCCESSFUL"


def test_an_unknown_task_fails_an_hour_after_a_worker_first_found_it_unknown() -> None:
    path = "tests.tasks_backend.never_deployed.add"
    result = jobs.add.using(window_seconds=300).enqueue(1, 1)
    body = body_of(result)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message")
        cursor.execute("UPDATE taskclaim.task_result SET task_path = %s", [path])
    task = {**body["task"], "taskPath": path}
    an_hour_ago = round((time.time() - 3600) * 1000)
    sent({**body, "task": task, "waitingSince": an_hour_ago + 60_000})
    assert drain(max_messages=1).retried == 1  # a minute to go
    [(resent, *_rest)] = message_rows()
    assert resent["waitingSince"] == an_hour_ago + 60_000
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message")
    sent({**body, "task": task, "waitingSince": an_hour_ago})
    assert drain().failed == 1
    stored = results.fetch("default", result.id)
    assert stored.status == "FAILED"
    assert "never_deployed" in stored.errors[-1]["traceback"]
    assert claims() == []
    assert message_rows() == []


def test_an_error_text_postgresql_cannot_hold_is_stored_escaped() -> None:
    result = jobs.fails_with_odd_text.enqueue()
    assert drain().failed == 1
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert "Boom: nul \\x00 lone \\ud800" in result.errors[0].traceback


@pytest.mark.usefixtures("worker_handlers")
def test_a_task_that_exits_or_interrupts_fails_its_attempt_and_the_worker_goes_on() -> None:
    exiting, interrupted = jobs.exits.enqueue(3), jobs.interrupts.using(max_retries=0).enqueue()
    healthy = jobs.add.enqueue(1, 2)
    stats = drain(max_messages=3)  # not the retry, which comes due at once
    assert (stats.retried, stats.failed, stats.ok) == (1, 1, 1)
    exiting.refresh()
    assert exiting.status == TaskResultStatus.READY
    assert exiting.errors[0].exception_class_path == "builtins.SystemExit"
    interrupted.refresh()
    assert interrupted.status == TaskResultStatus.FAILED
    assert interrupted.errors[0].exception_class_path == "builtins.KeyboardInterrupt"
    healthy.refresh()
    assert healthy.status == TaskResultStatus.SUCCESSFUL


def test_a_run_delivered_past_its_attempts_without_settling_fails_unrun(
    caplog: pytest.LogCaptureFixture,
) -> None:
    result = jobs.add.using(window_seconds=300).enqueue(1, 2)
    with connection.cursor() as cursor:  # three deliveries whose workers died
        cursor.execute("UPDATE taskclaim.message SET attempts = 3")
    assert drain().failed == 1
    assert jobs.calls == []
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert (
        result.errors[0].exception_class_path
        == "astral_taskclaim.consumer.failures.DeliveriesExhausted"
    )
    assert "delivered 4 times" in result.errors[0].traceback
    assert claims() == []
    assert len(events(caplog, "queue.task_abandoned")) == 1


def test_task_finished_of_a_failed_run_is_sent_inside_its_exception_handler(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[Any] = []

    def receiver(sender: Any, task_result: Any, **kwargs: Any) -> None:
        seen.append((task_result.status, sys.exc_info()[0]))

    task_finished.connect(receiver)
    try:
        jobs.fails_once_for_good.enqueue()
        assert drain().failed == 1
    finally:
        task_finished.disconnect(receiver)
    assert seen == [(TaskResultStatus.FAILED, jobs.Boom)]
    [line] = [
        r
        for r in caplog.records
        if r.name in ("django.tasks", "django_tasks") and r.levelno == logging.ERROR
    ]
    assert line.exc_info is not None
    assert line.exc_info[0] is jobs.Boom
