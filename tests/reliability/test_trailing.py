"""Trailing runs across processes: never a stale document, never a lost
trigger, never two runs of a key less than a window apart or side by side.

Producer processes save random documents (each save bumps the document's
version) and trigger the document's key with ``trailing="latest"`` in the
same transaction; worker processes run a task that records the
version it read at its start and when it ended. Some runs last longer than
the window. Part way through, a worker is SIGKILLed and replaced, or the
server restarts (the embedded one; on another, every worker connection is
terminated, as a restart does to them). Once the
producers stop, every document's last version must be read by some run
(no trigger lost: a run that read version v started after saves 1..v),
and the runs of each key that finished must start a window apart and never
overlap.
"""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection

from tests.reliability.processes import Fleet, subprocess_env
from tests.reliability.support import ROOT, record_figures, sized, wait_until
from tests.workerkit import restart_server_or_terminate

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

KEYS = sized(12, 40)
PRODUCERS = sized(2, 4)
WINDOW = 1.0
#: The claim is made by the statement before the task's first: the run's
#: recorded start is later than its window's start by that much at most.
SLACK = timedelta(milliseconds=100)


@pytest.fixture
def documents() -> list[str]:
    keys = [f"doc:{n}" for n in range(KEYS)]
    with connection.cursor() as cursor:
        cursor.execute(
            """CREATE TABLE IF NOT EXISTS trailing_doc (key text PRIMARY KEY, version int NOT NULL);
               CREATE TABLE IF NOT EXISTS trailing_run (
                 id bigserial PRIMARY KEY, key text NOT NULL, version_seen int NOT NULL,
                 token uuid, pid int NOT NULL,
                 started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
                 finished_at timestamptz);
               TRUNCATE trailing_doc, trailing_run"""
        )
        cursor.executemany("INSERT INTO trailing_doc VALUES (%s, 0)", [[key] for key in keys])
    yield keys
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE trailing_doc, trailing_run")


def versions() -> dict[str, tuple[int, int]]:
    """Each key's version and the newest version a run read."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT d.key, d.version, coalesce(max(r.version_seen), 0)
               FROM trailing_doc d LEFT JOIN trailing_run r USING (key) GROUP BY d.key"""
        )
        return {key: (version, seen) for key, version, seen in cursor.fetchall()}


@pytest.mark.parametrize("disruption", ["sigkill", "restart"])
def test_no_stale_document_no_lost_trigger_no_close_or_overlapping_runs(
    fleet: Fleet, documents: list[str], tmp_path: Path, disruption: str
) -> None:
    fleet.trailing = True
    seed = random.randrange(2**32)
    for _ in range(3):
        fleet.start("--concurrency", "4", "--wait", "1")
    stop = tmp_path / "stop"
    producers = []
    for number in range(PRODUCERS):
        arguments = {
            "keys": documents,
            "window": WINDOW,
            "seed": seed + number,
            "queue": fleet.options(),
            "ready": str(tmp_path / f"producer-{number}.ready"),
            "stop": str(stop),
        }
        producers.append(
            subprocess.Popen(
                [sys.executable, "-m", "tests.reliability.trailer", json.dumps(arguments)],
                cwd=ROOT,
                env=subprocess_env(f"tc-trailer-{number}"),
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    try:
        ready = [tmp_path / f"producer-{n}.ready" for n in range(PRODUCERS)]
        wait_until(lambda: all(path.exists() for path in ready), "the producers")
        wait_until(lambda: sum(v for v, _ in versions().values()) > 300, "300 saves")
        if disruption == "sigkill":
            fleet.running()[0].kill()  # anywhere: in a run, a claim write, a settlement
            fleet.start("--concurrency", "4", "--wait", "1")
        else:
            restart_server_or_terminate(fleet.application_name)
        wait_until(lambda: sum(v for v, _ in versions().values()) > 1200, "1200 saves", timeout=120)
    finally:
        stop.touch()
        triggers = sum(json.loads(p.communicate(timeout=60)[0])["triggers"] for p in producers)
    # Quiet now: every document's last version is read, within windows and leases.
    wait_until(
        lambda: all(version == seen for version, seen in versions().values()),
        f"every document's last version read (seed {seed})",
        timeout=60,
    )
    assert all(worker.stop() == 0 for worker in fleet.running())
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key, token, started_at, finished_at FROM trailing_run ORDER BY key, started_at"
        )
        runs = cursor.fetchall()
    close = overlapping = 0
    for _, of_key in itertools.groupby(runs, key=lambda run: run[0]):
        for (_, token, start, end), (_, again, later, _) in itertools.pairwise(of_key):
            if end is None:
                continue  # its worker was killed
            # The same token twice: a delivery again after a kill (its
            # batch was never settled), which at-least-once allows.
            close += token != again and later - start < timedelta(seconds=WINDOW) - SLACK
            overlapping += later < end
    record_figures(
        f"trailing_runs_{disruption}",
        keys=KEYS,
        producers=PRODUCERS,
        triggers=triggers,
        runs=len(runs),
        stale=0,
        close_runs=close,
        overlapping_runs=overlapping,
        seed=seed,
    )
    assert (close, overlapping) == (0, 0), f"seed {seed}"
    assert len(runs) < triggers / 2  # the triggers coalesced
