"""manage.py taskclaim_status: claims and queue depths, as text and JSON."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.queues.base import BaseQueue
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.queues.postgres import PostgresQueue
from tests.claimkit import insert_claim


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
