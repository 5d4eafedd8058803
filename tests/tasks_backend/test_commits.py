"""How a run's writes commit: the lease and the run's states without
waiting for the WAL flush, the settlement of its message waiting for it
(which makes everything before it durable too)."""

from __future__ import annotations

from django.db import transaction

from astral_taskclaim.tasks_backend import results
from astral_taskclaim.tasks_backend.compat import TaskResultStatus
from tests.commitkit import commit_settings

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
            assert not results.relaxed("default")
            payload = {"taskPath": jobs.add.module_path, "args": [1, 2], "kwargs": {}}
            assert results.start("default", result.id, payload) is not None
        assert noted() == [("task_result", "UPDATE", "on")]
    assert results.relaxed("default")  # autocommit again
