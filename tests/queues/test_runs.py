"""The run history of claimed tasks: what the workers write to taskclaim.run
with each settlement, how much each task keeps, and its cleanup."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import override_settings

from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.consumer.consume import Consumer
from astral_taskclaim.consumer.dispatch import naming_task
from astral_taskclaim.queues import runs as runs_module
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.queues.runs import _MAX_TRACEBACK_CHARS, worker_id
from astral_taskclaim.tasks import ClaimedTask, TaskRegistry
from astral_taskclaim.tasks_backend.retention import delete_old_results
from astral_taskclaim.worker.loop import Worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

FIELDS = "task, queue, key, status, attempts, errors, worker_ids, payload, finished_at IS NULL"


class Failure(Exception):
    pass


@pytest.fixture(autouse=True)
def empty_runs() -> Iterator[None]:
    """No runs before or after (a test of another module may leave some)."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.run")
    yield
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.run")


@pytest.fixture
def queue() -> Iterator[PostgresQueue]:
    made = PostgresQueue("jobs", options={"queue_name": f"runs-{uuid.uuid4().hex}"})
    yield made
    made.close()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [made.queue_name])


def make_task(run: Any, **options: Any) -> ClaimedTask[Any]:
    return TaskRegistry().task(queue="jobs", **{"name": "app.tasks.job", **options})(run)


def send(queue: Any, *ids: int) -> dict[int, str]:
    tokens = {}
    for id_ in ids:
        token = enqueue_claimed(queue, f"job:{id_}", {"id": id_}, window_seconds=300)
        assert token is not None
        tokens[id_] = token
    return tokens


def drain(queue: Any, task: ClaimedTask[Any]) -> None:
    Worker("jobs", task=task, backend=queue, wait=0, burst=True).run()


def runs() -> dict[str, dict[str, Any]]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id::text, {FIELDS} FROM taskclaim.run")
        names = [column.name for column in cursor.description][1:]
        found = {row[0]: dict(zip(names, row[1:], strict=True)) for row in cursor.fetchall()}
    for run in found.values():
        run["errors"] = json.loads(run["errors"])
        run["worker_ids"] = json.loads(run["worker_ids"])
    return found


def expire(queue: PostgresQueue) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE taskclaim.message SET visible_at = clock_timestamp() WHERE queue = %s",
            [queue.queue_name],
        )


def test_a_successful_run_is_recorded_with_the_settlement(queue: PostgresQueue) -> None:
    tokens = send(queue, 1)
    drain(queue, make_task(lambda task: None))
    assert runs() == {
        tokens[1]: {
            "task": "app.tasks.job",
            "queue": "jobs",
            "key": "job:1",
            "status": "SUCCESSFUL",
            "attempts": 1,
            "errors": [],
            "worker_ids": [worker_id()],
            "payload": None,
            "?column?": False,
        }
    }
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT started_at <= last_attempted_at, started_at <= finished_at FROM taskclaim.run"
        )
        assert cursor.fetchone() == (True, True)


def test_each_failed_attempt_is_kept_until_the_give_up(queue: PostgresQueue) -> None:
    def fail(task: Any) -> None:
        raise Failure(f"no {task['id']}")

    task = make_task(fail, max_retries=1)
    tokens = send(queue, 1)
    drain(queue, task)
    [run] = runs().values()
    assert (run["status"], run["attempts"], run["?column?"]) == ("RETRYING", 1, True)
    [error] = run["errors"]
    assert error["exception_class_path"] == f"{__name__}.Failure"
    assert error["message"] == "no 1"
    assert "raise Failure" in error["traceback"]
    assert (error["attempt"], error["final"]) == (1, False)
    expire(queue)
    drain(queue, task)
    run = runs()[tokens[1]]
    assert (run["status"], run["attempts"], run["?column?"]) == ("FAILED", 2, False)
    assert [(e["attempt"], e["final"]) for e in run["errors"]] == [(1, False), (2, True)]
    assert run["worker_ids"] == [worker_id(), worker_id()]
    assert json.loads(run["payload"]) == {"id": 1}  # kept for a retry


def test_a_success_after_a_failure_finishes_the_run(queue: PostgresQueue) -> None:
    attempts: list[int] = []

    def flaky(task: Any) -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise Failure("once")

    task = make_task(flaky, history="failures")
    tokens = send(queue, 1)
    drain(queue, task)
    expire(queue)
    drain(queue, task)
    run = runs()[tokens[1]]
    assert (run["status"], run["attempts"], len(run["errors"])) == ("SUCCESSFUL", 2, 1)
    assert run["payload"] is None


def test_failures_only_skips_first_time_successes(queue: PostgresQueue) -> None:
    def run(task: Any) -> None:
        if task["id"] == 2:
            raise Failure("two")

    tokens = send(queue, 1, 2)
    drain(queue, make_task(run, history="failures", max_retries=0))
    assert {token: found["status"] for token, found in runs().items()} == {tokens[2]: "FAILED"}


def test_none_records_nothing(queue: PostgresQueue) -> None:
    send(queue, 1)
    drain(queue, make_task(lambda task: None, history="none"))
    assert runs() == {}


def test_the_queue_setting_applies_to_tasks_that_set_nothing(queue: PostgresQueue) -> None:
    config = {"jobs": {"BACKEND": "astral_taskclaim.queues.memory.MemoryQueue", "HISTORY": "none"}}
    send(queue, 1, 2)
    with override_settings(TASKCLAIM_QUEUES=config):
        Worker(
            "jobs",
            task=make_task(lambda t: None),
            backend=queue,
            wait=0,
            burst=True,
            max_messages=1,
        ).run()
        assert runs() == {}
        drain(queue, make_task(lambda t: None, history="all"))  # the task's own wins
    assert len(runs()) == 1


def test_bad_modes_are_refused() -> None:
    with pytest.raises(ValueError, match="history must be one of 'all', 'failures', 'none'"):
        make_task(lambda t: None, history="some")
    config = {"jobs": {"BACKEND": "astral_taskclaim.queues.memory.MemoryQueue", "HISTORY": 1}}
    with (
        override_settings(TASKCLAIM_QUEUES=config),
        pytest.raises(
            ImproperlyConfigured, match=r"TASKCLAIM_QUEUES\['jobs'\]\['HISTORY'\] must be one of"
        ),
    ):
        make_task(lambda t: None).consumer()


def test_a_queue_that_does_not_settle_runs_has_the_worker_write_them() -> None:
    queue = MemoryQueue("jobs", options={"queue_name": f"runs-{uuid.uuid4().hex}"})
    assert not queue.records_runs
    tokens = send(queue, 1, 2)
    drain(queue, make_task(lambda t: None))
    assert {token: run["status"] for token, run in runs().items()} == {
        tokens[1]: "SUCCESSFUL",
        tokens[2]: "SUCCESSFUL",
    }


def test_odd_exception_text_is_stored_and_a_huge_traceback_cut(queue: PostgresQueue) -> None:
    def fail(task: Any) -> None:
        raise Failure("nul \x00 lone \ud800 " + "x" * (_MAX_TRACEBACK_CHARS + 10))

    tokens = send(queue, 1)
    drain(queue, make_task(fail, max_retries=0))
    [error] = runs()[tokens[1]]["errors"]
    assert error["message"].startswith("nul \\x00 lone \\ud800 x")
    assert len(error["traceback"]) == _MAX_TRACEBACK_CHARS


def test_keys_and_payloads_of_any_text_are_stored_exactly(queue: PostgresQueue) -> None:
    # The batch travels as one JSON text: quotes, backslashes, non-ASCII and
    # astral characters must come back as they went in.
    key = 'job:"quoted" back\\slash \u00e9t\u00e9 \U0001f600 tab\t'
    token = enqueue_claimed(queue, key, {"text": key}, window_seconds=300)

    def fail(task: Any) -> None:
        raise Failure(task["text"])

    drain(queue, make_task(fail, max_retries=0))
    run = runs()[str(token)]
    assert (run["key"], run["status"]) == (key, "FAILED")
    assert json.loads(run["payload"]) == {"text": key}
    assert run["errors"][0]["message"] == key


def send_named(queue: Any, count: int) -> None:
    """``count`` bodies naming task ``app.tasks.job``, and one naming a task
    with a NUL in its name, last."""
    named = naming_task(queue, "app.tasks.job")
    for id_ in range(count):
        enqueue_claimed(named, f"job:{id_}", {"id": id_}, window_seconds=300)
    odd = {"key": "job:odd", "claim": str(uuid.uuid4()), "windowSeconds": 300, "task": 1}
    queue.send({**odd, "taskName": "app.\x00evil"})


@pytest.mark.parametrize("kind", ["postgres", "memory"])
def test_a_nul_in_a_task_name_costs_no_batch_mate_its_run(
    kind: str, queue: PostgresQueue, caplog: pytest.LogCaptureFixture
) -> None:
    backend = queue if kind == "postgres" else MemoryQueue("jobs", options={"queue_name": "nul"})
    send_named(backend, 10)
    tasks = Consumer("jobs", [make_task(lambda t: None), make_task(print, name="app.other")])
    Worker("jobs", task=tasks, backend=backend, wait=0, burst=True, batch_size=11).run()
    found = sorted((run["task"], run["status"]) for run in runs().values())
    assert found == [("app.\\x00evil", "FAILED")] + [("app.tasks.job", "SUCCESSFUL")] * 10
    assert not [r for r in caplog.records if getattr(r, "event", "") == "queue.runs_not_recorded"]


def test_a_batch_the_history_refuses_is_written_run_by_run(
    queue: PostgresQueue, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(runs_module, "storable", lambda text: text)  # the NUL reaches the SQL
    send_named(queue, 10)
    tasks = Consumer("jobs", [make_task(lambda t: None), make_task(print, name="app.other")])
    Worker("jobs", task=tasks, backend=queue, wait=0, burst=True, batch_size=11).run()
    assert [run["task"] for run in runs().values()] == ["app.tasks.job"] * 10
    lost = [r for r in caplog.records if getattr(r, "event", "") == "queue.runs_not_recorded"]
    assert [r.getMessage() for r in lost] == [
        "jobs: 1 runs could not be recorded in the history; their messages are settled"
    ]


def test_a_settlement_after_the_lease_ran_out_records_nothing(queue: PostgresQueue) -> None:
    send(queue, 1)
    batch = queue.receive(max_messages=1)
    with connection.cursor() as cursor:  # another delivery took the message
        cursor.execute(
            "UPDATE taskclaim.message SET lease = gen_random_uuid() WHERE queue = %s",
            [queue.queue_name],
        )
    make_task(lambda t: None).consume(batch)
    queue.settle(batch.messages)
    assert runs() == {}


def test_the_results_cleanup_deletes_old_runs(queue: PostgresQueue) -> None:
    tokens = send(queue, 1, 2, 3)
    drain(queue, make_task(lambda t: None))
    with connection.cursor() as cursor:
        cursor.execute(
            """UPDATE taskclaim.run SET finished_at = now() - interval '2 hours'
               WHERE id = %s::uuid""",
            [tokens[1]],
        )
        cursor.execute(  # never finished, its message gone more than a day past retention
            """UPDATE taskclaim.run SET finished_at = NULL, status = 'RETRYING',
                 last_attempted_at = now() - interval '26 hours' WHERE id = %s::uuid""",
            [tokens[2]],
        )
    assert delete_old_results(connection, 3600) == 2
    assert set(runs()) == {tokens[3]}
