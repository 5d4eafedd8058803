"""How a run's writes commit: the lease and the run's states without
waiting for the WAL flush, the settlement of its message waiting for it
(which makes everything before it durable too); with a synchronous
standby, the states as configured (a settlement retried on the promoted
standby after a failover must not find the message without them)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import OperationalError, connection, transaction

from astral_taskclaim.tasks_backend import results
from astral_taskclaim.tasks_backend.compat import TaskResultStatus
from astral_taskclaim.worker.loop import Worker
from tests.commitkit import commit_settings
from tests.workerkit import ROOT

from . import jobs
from .running import drain


def test_a_successful_run_commits_its_states_unflushed_and_its_ack_flushed() -> None:
    result = jobs.add.enqueue(1, 2)
    with commit_settings("taskclaim.message", "taskclaim.task_result") as noted:
        assert drain().ok == 1
        assert noted() == [
            ("message", "UPDATE", "off"),  # the lease
            ("task_result", "UPDATE", "off"),  # RUNNING
            ("task_result", "UPDATE", "off"),  # SUCCESSFUL
            ("message", "DELETE", "on"),  # the ack
        ]
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL


def test_a_failed_attempt_commits_its_error_unflushed_and_its_retry_flushed() -> None:
    result = jobs.flaky.enqueue(1)
    with commit_settings("taskclaim.message", "taskclaim.task_result") as noted:
        assert drain(max_messages=1).retried == 1
        assert noted() == [
            ("message", "UPDATE", "off"),  # the lease
            ("task_result", "UPDATE", "off"),  # RUNNING
            ("task_result", "UPDATE", "off"),  # READY again, with the error
            ("message", "UPDATE", "on"),  # the retry
        ]
    result.refresh()
    assert result.status == TaskResultStatus.READY


def test_a_state_written_inside_a_transaction_commits_with_it_as_configured() -> None:
    result = jobs.add.enqueue(1, 2)
    with commit_settings("taskclaim.task_result") as noted:
        with transaction.atomic():
            assert not results._relaxed("default")
            payload = {"taskPath": jobs.add.module_path, "args": [1, 2], "kwargs": {}}
            assert results.start("default", result.id, payload) is not None
        assert noted() == [("task_result", "UPDATE", "on")]
    assert results._relaxed("default")  # autocommit again


@pytest.fixture
def synchronous_standby() -> Iterator[None]:
    """The server configured with a synchronous standby that never answers,
    this session's own commits waiting for none (``synchronous_commit =
    local``). Only on the embedded server: any other client's commit would
    wait for that standby while it is set."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW data_directory")
        row = cursor.fetchone()
    assert row is not None
    embedded = Path(os.environ.get("TASKCLAIM_PGDATA") or ROOT / ".pgdata").resolve()
    if Path(row[0]).resolve() != embedded:
        pytest.skip("changes the server's configuration: the embedded server only")
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit = local")
        cursor.execute("ALTER SYSTEM SET synchronous_standby_names = 'taskclaim_no_such_standby'")
        cursor.execute("SELECT pg_reload_conf()")
    try:
        # The reload is a signal each backend acts on between statements.
        deadline = time.monotonic() + 30
        while current("synchronous_standby_names") == "" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert current("synchronous_standby_names") != ""
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER SYSTEM RESET synchronous_standby_names")
            cursor.execute("SELECT pg_reload_conf()")
            cursor.execute("RESET synchronous_commit")


def current(setting: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting(%s)", [setting])
        row = cursor.fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.usefixtures("synchronous_standby")
def test_with_a_synchronous_standby_a_runs_states_commit_as_configured() -> None:
    """A failover promotes the standby; the worker's settlement, retried
    there, must not find the message without the states written before it."""
    result = jobs.add.enqueue(1, 2)
    payload = {"taskPath": jobs.add.module_path, "args": [1, 2], "kwargs": {}}
    with commit_settings("taskclaim.task_result") as noted:
        assert results.start("default", result.id, payload) is not None
        assert results.succeed("default", result.id, 3) is not None
        assert noted() == [("task_result", "UPDATE", "local")] * 2
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_run_whose_success_write_fails_is_delivered_again(
    concurrency: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's message was acked when its success write failed (the
    connection lost in a failover): it is handed back, not settled, or the
    result would stay RUNNING for ever."""
    succeed, failed = results.succeed, []

    def succeed_but_the_first(*args: Any) -> Any:
        if not failed:
            failed.append(args)
            raise OperationalError("server closed the connection unexpectedly")
        return succeed(*args)

    monkeypatch.setattr(results, "succeed", succeed_but_the_first)
    monkeypatch.setattr("astral_taskclaim.worker.loop.FIRST_BACKOFF", 0.01)
    result = jobs.add.enqueue(1, 2)
    for _ in range(2):  # a burst may end at the error; the next one drains the rest
        Worker("default", concurrency=concurrency, wait=0, burst=True).run()
    assert len(failed) == 1
    assert jobs.calls == [("add", 1, 2)] * 2  # run again
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 3)
