"""``manage.py consume_claimed`` worker processes consuming claimed tasks
from the local Cloudflare server and from moto's SQS, end to end.

The test process claims and enqueues; each worker is a separate
``django-admin`` process running ``tests.e2e.workerapp``'s task, which knows
its queue only from ``TASKCLAIM_QUEUES`` (see ``tests.e2e.settings``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
from django.db import connection

from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.queues.base import BaseQueue
from astral_taskclaim.queues.cloudflare import CloudflareQueue
from astral_taskclaim.queues.sqs import SQSQueue
from tests.queues.cloudflare_server import CloudflareQueuesServer
from tests.queues.servers import MotoSQS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = re.compile(r"e2e: (\d+) received, (\d+) ok, (\d+) retried, (\d+) failed")


def run_worker(queue_config: dict[str, Any]) -> list[int]:
    """One ``consume_claimed e2e --burst`` process; its summary counts
    (received, ok, retried, failed)."""
    # The server the tests use, and the database pytest-django made on it.
    server = urlsplit(os.environ["DATABASE_URL"])
    database = urlunsplit(server._replace(path="/" + quote(connection.settings_dict["NAME"])))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.e2e.settings",
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": database,
        "TASKCLAIM_E2E_QUEUES": json.dumps({"e2e": queue_config}),
        # The failed run's retry comes after 0.6 s instead of the TypeScript package's 30.
        "TASKCLAIM_E2E_DELAY_SCALE": "0.02",
    }
    command = [sys.executable, "-m", "django", "consume_claimed", "e2e", "--burst", "--wait", "1"]
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    found = SUMMARY.search(done.stdout)
    assert found, done.stdout + done.stderr
    return [int(group) for group in found.groups()]


def consume_everything(
    queue: BaseQueue, backend: str, options: dict[str, Any], tmp_path: Path
) -> None:
    """Enqueues three tasks, one failing its first run, and runs workers
    until each has succeeded."""
    log = tmp_path / "runs.jsonl"
    tasks = [
        {"id": 1, "log": str(log)},
        {"id": 2, "log": str(log), "fail_first": True},
        {"id": 3, "log": str(log), "name": "Zoë ☕"},
    ]
    # Claims outlive the test's flush (Django does not own their table).
    keys = [f"e2e:{uuid.uuid4()}" for _ in tasks]
    tokens = {
        key: enqueue_claimed(queue, key, task, window_seconds=60)
        for key, task in zip(keys, tasks, strict=True)
    }
    assert all(tokens.values())
    totals = [0, 0, 0, 0]
    for _ in range(5):  # the retried task waits out its delay, maybe in a later run
        counts = run_worker({"BACKEND": backend, "OPTIONS": options})
        totals = [total + count for total, count in zip(totals, counts, strict=True)]
        if totals[1] == len(tasks):
            break
    assert totals == [4, 3, 1, 0]  # received, ok, retried, failed
    runs = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert sorted((run["id"], run["run"]) for run in runs) == [(1, 1), (2, 1), (2, 2), (3, 1)]
    # Success keeps the claim for its window, under the token enqueued with it.
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, token::text FROM taskclaim.claim WHERE key = ANY(%s)", [keys])
        assert dict(cursor.fetchall()) == tokens


def test_workers_consume_from_cloudflare(
    cloudflare_server: CloudflareQueuesServer,
    cloudflare_options: Callable[..., dict[str, Any]],
    tmp_path: Path,
) -> None:
    options = cloudflare_options(poll_interval=0.2)
    queue = CloudflareQueue("e2e", options=options)
    consume_everything(
        queue, "astral_taskclaim.queues.cloudflare.CloudflareQueue", options, tmp_path
    )
    assert cloudflare_server.stored(options["queue_id"]) == []


def test_workers_consume_from_sqs(moto_sqs: MotoSQS, tmp_path: Path) -> None:
    url = moto_sqs.create_queue()
    options = moto_sqs.options(url, wait_time_seconds=1)
    queue = SQSQueue("e2e", options=options)
    consume_everything(queue, "astral_taskclaim.queues.sqs.SQSQueue", options, tmp_path)
    counts = moto_sqs.client().get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    assert set(counts.values()) == {"0"}
