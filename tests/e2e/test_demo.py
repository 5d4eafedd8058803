"""``make demo`` (``example_project/demo.py``) end to end, on the test
database: its numbers add up."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from .support import database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BASE_DIR = Path(__file__).resolve().parents[2]


def number(output: str, label: str) -> int:
    found = re.search(rf"^  {label} +([\d,]+)", output, re.MULTILINE)
    assert found, output
    return int(found.group(1).replace(",", ""))


def test_the_demo_runs_and_its_numbers_add_up() -> None:
    env = {**os.environ, "DATABASE_URL": database_url("taskclaim-demo-test")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, "example_project/demo.py"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = done.stdout
    assert done.returncode == 0, output + done.stderr
    triggers, sent = number(output, "triggers"), number(output, "messages sent")
    runs, retries = number(output, "runs"), number(output, "retries")
    give_ups = number(output, "give-ups")
    ok = int(re.search(r"(\d+) ok, ", output).group(1))  # type: ignore[union-attr]
    assert triggers == 4000
    assert 0 < sent < triggers / 2  # coalescing is visible
    assert runs == ok + retries + give_ups
    assert ok + give_ups == sent  # every message ended
    assert re.search(r"rooms refreshed +36/36", output), output
    delays = re.findall(r"(\d+) x ([\d.]+) s \(unscaled: (\d+) s\)", output)
    assert sum(int(count) for count, _, _ in delays) == retries
    assert {unscaled for _, _, unscaled in delays} <= {"30", "45", "60", "120"}
    assert "make serve" in output
    # Django's @task on the same engine: 100 enqueues, one run, every caller got it.
    assert re.search(r"^  enqueues +100 ", output, re.MULTILINE), output
    assert re.search(r"^  runs +1 +one per key per window", output, re.MULTILINE), output
    assert re.search(r"result +SUCCESSFUL +returned 36 rooms", output), output
    # The workers' one-second schedule: slots enqueued, each run once.
    assert number(output, "slots") > 0
    assert re.search(r"^  runs per slot +1 ", output, re.MULTILINE), output
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM taskclaim.message WHERE queue = 'refresh'")
        assert cursor.fetchone() == (0,)
        cursor.execute("DELETE FROM taskclaim.claim WHERE key LIKE 'room:%%'")
