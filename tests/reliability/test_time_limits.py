"""A sync task that never returns, with a time limit, in a real
``consume_claimed`` process: its attempt is failed at once and retried, the
other lanes finish their runs, and the worker exits with status 75 for its
supervisor to restart it; the next worker runs the retry. Nothing is lost."""

from __future__ import annotations

import json

import pytest

from astral_taskclaim.management.commands.consume_claimed import HUNG_EXIT_STATUS
from tests.reliability.processes import Fleet, RunListener, runs
from tests.workerkit import WorkerProcess

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TASKS = 12


def start(fleet: Fleet, *args: str) -> WorkerProcess:
    """A worker on the fleet's queue, whose ``TIME_LIMIT`` is 1 second."""
    entry = {
        "BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue",
        "OPTIONS": fleet.options(),
        "TIME_LIMIT": 1,
    }
    env = {
        "TASKCLAIM_RELIABILITY_QUEUES": json.dumps({"reliability": entry}),
        "TASKCLAIM_RELIABILITY_DELAY_SCALE": str(fleet.delay_scale),
        "TASKCLAIM_RELIABILITY_MAX_RETRIES": str(fleet.max_retries),
    }
    return fleet.group.start(
        "reliability", *args, env=env, events_variable="TASKCLAIM_RELIABILITY_EVENTS"
    )


def test_a_hung_sync_task_makes_its_worker_exit_for_a_restart_and_loses_nothing(
    fleet: Fleet,
) -> None:
    tasks = [{"id": 1, "mode": "hang_first"}]
    tasks += [{"id": id_, "mode": "ok"} for id_ in range(2, TASKS + 1)]
    fleet.enqueue(tasks)
    listener = RunListener()
    try:
        first = start(fleet, "--concurrency", "4", "--wait", "0.2")
        # The worker stops by itself: no signal is sent.
        assert first.wait() == HUNG_EXIT_STATUS, first.output()
        events = [entry for entry in first.events() if entry["event"]]
        [timed_out] = [e for e in events if e["event"] == "queue.task_timed_out"]
        fields = timed_out["extra"]
        assert (fields["key"], fields["attempts"], fields["hung"]) == (
            "reliability:1",
            1,
            True,
        )
        assert any(e["event"] == "worker.task_hung" for e in events)
        assert any(e["event"] == "queue.task_retrying" for e in events)
        assert "left running past its time limit" in first.output()

        # The supervisor's restart runs the retry and whatever was handed back.
        second = start(fleet, "--concurrency", "4", "--burst", "--wait", "1")
        assert second.wait() == 0, second.output()
    finally:
        listener.close()
    assert fleet.messages_left() == 0
    found = runs()
    assert found[1] == ["fail", "ok"]  # the hung first run, then the retry
    assert sorted(found) == list(range(1, TASKS + 1))  # 0 lost
    assert all(outcomes == ["ok"] for id_, outcomes in found.items() if id_ != 1)
