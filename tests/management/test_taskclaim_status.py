"""manage.py taskclaim_status: claims and queue depths, as text and JSON."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.queues import create_queue
from astral_taskclaim.queues.base import BaseQueue
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.queues.postgres import PostgresQueue
from tests.admin.data import add_run
from tests.claimkit import insert_claim
from tests.queues.servers import MotoSQS


class Opaque(MemoryQueue):
    """A backend keeping the base class's status(): nothing known."""

    status = BaseQueue.status


pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


def status(*args: str) -> str:
    out = io.StringIO()
    call_command("taskclaim_status", *args, stdout=out)
    return out.getvalue()


def fill(jobs: PostgresQueue) -> None:
    """One ready, one delayed and one leased message; three claims, one expired."""
    for key in ("a", "b", "c"):
        enqueue_claimed(jobs, key, 1, window_seconds=60)
    jobs.receive(max_messages=1)  # leased
    with connection.cursor() as cursor:
        cursor.execute(
            """UPDATE taskclaim.message SET visible_at = now() + interval '1 hour',
               enqueued_at = now() - interval '90 seconds'
               WHERE id = (SELECT max(id) FROM taskclaim.message WHERE queue = %s)""",
            [jobs.queue_name],
        )
    insert_claim("old", seconds=-5)


def test_json_gives_each_count(jobs: PostgresQueue) -> None:
    fill(jobs)
    found = json.loads(status("--json"))
    assert found["claims"] == {"database": "default", "active": 3, "expired": 1}
    queue = found["queues"]["jobs"]
    assert {k: queue[k] for k in ("backend", "ready", "delayed", "leased", "error")} == {
        "backend": "PostgresQueue",
        "ready": 1,
        "delayed": 1,
        "leased": 1,
        "error": None,
    }
    assert 89 <= queue["oldest_age_seconds"] < 600


def test_text_is_a_table(jobs: PostgresQueue) -> None:
    fill(jobs)
    lines = status().splitlines()
    assert lines[0] == "claims in default: 3 active, 1 expired"
    assert lines[1].split() == ["queue", "backend", "ready", "delayed", "leased", "oldest", "(s)"]
    assert lines[2].split()[:5] == ["jobs", "PostgresQueue", "1", "1", "1"]


def test_a_backend_that_knows_nothing_shows_question_marks() -> None:
    config = {"mem": {"BACKEND": "tests.management.test_taskclaim_status.Opaque"}}
    with override_settings(TASKCLAIM_QUEUES=config):
        lines = status().splitlines()
    assert lines[2].split() == ["mem", "Opaque", "?", "?", "?", "?"]


@pytest.fixture
def empty_runs() -> Iterator[None]:
    """No runs of either kind before and after (other tests leave failures)."""

    def empty() -> None:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM taskclaim.run")
            cursor.execute("DELETE FROM taskclaim.task_result")

    empty()
    yield
    empty()


@pytest.mark.usefixtures("empty_runs")
def test_recent_failures_of_both_kinds_are_listed_newest_first() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO taskclaim.run (id, task, queue, key, status, attempts, errors,
                 started_at, last_attempted_at, finished_at) VALUES
               (gen_random_uuid(), 'app.refresh', 'jobs', 'project:1', 'FAILED', 4,
                '[{"exception_class_path": "app.Boom", "message": "down\\nhard"}]',
                now(), now(), now() - interval '5 minutes'),
               (gen_random_uuid(), 'app.refresh', 'jobs', 'project:2', 'SUCCESSFUL', 1, '[]',
                now(), now(), now()),
               (gen_random_uuid(), 'app.refresh', 'jobs', 'project:3', 'FAILED', 1, '[]',
                now(), now(), now() - interval '2 days')"""
        )
    add_run("FAILED", finished_ago=60, final_error=True)
    [django, claimed] = json.loads(status("--json"))["recent_failures"]
    assert (django["kind"], django["task"], django["error_class"]) == (
        "django",
        "tests.tasks_backend.jobs.add",
        "tests.tasks_backend.jobs.Boom",
    )
    assert {k: claimed[k] for k in ("kind", "task", "key", "attempts", "error_message")} == {
        "kind": "claimed",
        "task": "app.refresh",
        "key": "project:1",
        "attempts": 4,
        "error_message": "down\nhard",
    }
    assert 299 <= claimed["age_seconds"] < 600
    lines = status().splitlines()
    at = lines.index("recent failures (last day), newest first:")
    assert "tests.tasks_backend.jobs.add" in lines[at + 1]
    assert lines[at + 2].endswith(
        f"app.refresh project:1 ({claimed['id']}) after 4 attempts: app.Boom: down\\nhard"
    )
    # Two failures, then the next section (the schedules) or the end.
    assert lines[at + 3 :] == [line for line in lines[at + 3 :] if line.startswith("schedule ")]


@pytest.mark.usefixtures("empty_runs")
def test_no_recent_failures_says_so() -> None:
    assert "recent failures (last day): none" in status().splitlines()


def sqs(moto_sqs: MotoSQS, url: str, **options: Any) -> dict[str, Any]:
    backend = "astral_taskclaim.queues.sqs.SQSQueue"
    return {"BACKEND": backend, "OPTIONS": moto_sqs.options(url, **options)}


@pytest.fixture
def queues_out_of_reach(moto_sqs: MotoSQS, empty_claims: None) -> Iterator[None]:
    """A PostgreSQL queue with a message, an SQS queue whose server refuses
    connections, one whose URL SQS does not know, and an outbox queue."""
    url = moto_sqs.create_queue()
    config = {
        "local": {"BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue"},
        "down": sqs(moto_sqs, url, endpoint_url="http://127.0.0.1:9"),
        "gone": sqs(moto_sqs, url.rsplit("/", 1)[0] + "/no-such-queue"),
        "boxed": sqs(moto_sqs, url, endpoint_url="http://127.0.0.1:9", outbox=True),
    }
    with override_settings(TASKCLAIM_QUEUES=config):
        enqueue_claimed(create_queue("boxed"), "waiting", 1, window_seconds=60)
        yield
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.outbox WHERE queue = 'boxed'")


@pytest.mark.usefixtures("queues_out_of_reach")
def test_json_keeps_every_field_of_a_queue_out_of_reach() -> None:
    found = json.loads(status("--json"))
    assert found["claims"]["active"] == 1
    fields = {"backend", "ready", "delayed", "leased", "oldest_age_seconds", "details", "error"}
    for name in ("down", "gone", "boxed"):
        queue = found["queues"][name]
        assert set(queue) == fields
        assert queue["backend"] == "SQSQueue"
        assert (queue["ready"], queue["delayed"], queue["leased"]) == (None, None, None)
        assert "GetQueueAttributes" in queue["error"]
    assert "NonExistentQueue" in found["queues"]["gone"]["error"]
    assert found["queues"]["local"]["error"] is None
    assert found["outboxes"]["boxed"]["depth"] == 1
    assert found["outboxes"]["boxed"]["dead"] == 0


@pytest.mark.usefixtures("queues_out_of_reach")
def test_text_prints_every_section_and_each_queues_error() -> None:
    out, err = io.StringIO(), io.StringIO()
    call_command("taskclaim_status", stdout=out, stderr=err)
    lines = out.getvalue().splitlines()
    assert lines[0] == "claims in default: 1 active, 0 expired"
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:6]}
    assert rows["down"] == ["SQSQueue", "?", "?", "?", "?"]
    assert rows["gone"] == ["SQSQueue", "?", "?", "?", "?"]
    assert "outbox of boxed: 1 rows waiting for the relay" in out.getvalue()
    problems = err.getvalue()
    assert "down: " in problems
    assert "gone: " in problems
    assert "NonExistentQueue" in problems


@pytest.mark.parametrize("never", ["infinity", "-infinity"])
def test_a_message_enqueued_at_infinity_leaves_the_counts_shown(
    jobs: PostgresQueue, never: str
) -> None:
    fill(jobs)
    with connection.cursor() as cursor:  # written by hand
        cursor.execute(
            "UPDATE taskclaim.message SET enqueued_at = %s::timestamptz WHERE queue = %s",
            [never, jobs.queue_name],
        )
    queue = json.loads(status("--json"))["queues"]["jobs"]
    assert queue["error"] is None
    assert (queue["ready"], queue["delayed"], queue["leased"]) == (1, 1, 1)
    assert queue["oldest_age_seconds"] is None  # no message's age can be told
