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
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.reliability.processes import Fleet, subprocess_env
from tests.reliability.support import ROOT, record_figures, sized, wait_until
from tests.workerkit import restart_server_or_terminate

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

KEYS = sized(12, 40)
PRODUCERS = sized(2, 4)
WINDOW = 1.0
#: Debouncing: the quiet period and the maximum wait.
QUIET, MAX_WAIT = 0.4, 1.5
#: libfaketime, preloaded by ``env`` (which execs: the worker keeps its pid).
FAKETIME = next(iter(sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))), None)
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
                 token uuid, claim_ends timestamptz, pid int NOT NULL,
                 started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
                 finished_at timestamptz);
               CREATE TABLE IF NOT EXISTS trailing_save (
                 key text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
               TRUNCATE trailing_doc, trailing_run, trailing_save"""
        )
        cursor.executemany("INSERT INTO trailing_doc VALUES (%s, 0)", [[key] for key in keys])
    yield keys
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE trailing_doc, trailing_run, trailing_save")


def versions() -> dict[str, tuple[int, int]]:
    """Each key's version and the newest version a run read."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT d.key, d.version, coalesce(max(r.version_seen), 0)
               FROM trailing_doc d LEFT JOIN trailing_run r USING (key) GROUP BY d.key"""
        )
        return {key: (version, seen) for key, version, seen in cursor.fetchall()}


def start_producers(
    fleet: Fleet, keys: list[str], tmp_path: Path, seed: int, **extra: Any
) -> list[subprocess.Popen[str]]:
    """Producer processes (:mod:`tests.reliability.trailer`), once ready."""
    producers = []
    for number in range(PRODUCERS):
        arguments = {
            "keys": keys,
            "window": WINDOW,
            "seed": seed + number,
            "queue": fleet.options(),
            "ready": str(tmp_path / f"producer-{number}.ready"),
            "stop": str(tmp_path / "stop"),
            **extra,
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
    ready = [tmp_path / f"producer-{n}.ready" for n in range(PRODUCERS)]
    wait_until(lambda: all(path.exists() for path in ready), "the producers")
    return producers


def stop_producers(producers: list[subprocess.Popen[str]], tmp_path: Path) -> int:
    """Stops the producers; the triggers they made."""
    (tmp_path / "stop").touch()
    return sum(json.loads(p.communicate(timeout=60)[0])["triggers"] for p in producers)


def finished_runs(fleet: Fleet, seed: int) -> list[tuple[str, Any, datetime, datetime | None]]:
    """Once every document's last version is read: the runs (key, token,
    start, end), by key and start, the workers stopped."""
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
        return cursor.fetchall()


def close_and_overlapping(
    runs: list[tuple[str, Any, datetime, datetime | None]],
) -> tuple[int, int]:
    """Pairs of a key's consecutive runs starting less than a window apart,
    and overlapping."""
    close = overlapping = 0
    for _, of_key in itertools.groupby(runs, key=lambda run: run[0]):
        for (_, token, start, end), (_, again, later, _) in itertools.pairwise(of_key):
            if end is None:
                continue  # its worker was killed
            # The same token twice: a delivery again after a kill (its
            # batch was never settled), which at-least-once allows.
            close += token != again and later - start < timedelta(seconds=WINDOW) - SLACK
            overlapping += later < end
    return close, overlapping


@pytest.mark.parametrize("disruption", ["sigkill", "restart", "skewed_clocks"])
def test_no_stale_document_no_lost_trigger_no_close_or_overlapping_runs(
    fleet: Fleet, documents: list[str], tmp_path: Path, disruption: str
) -> None:
    """With ``skewed_clocks``, one worker's clock runs 90 s ahead and one's
    90 s behind (``faketime``): the claims and follow-ups are timed by the
    database's clock alone."""
    if disruption == "skewed_clocks" and FAKETIME is None:
        pytest.skip("needs faketime (Debian package faketime)")
    fleet.trailing = True
    seed = random.randrange(2**32)
    for skew in ["+90s", "-90s", None]:
        skewed = skew and disruption == "skewed_clocks"
        # A wrong wall clock; the monotonic one is right (as on a real
        # machine), which also keeps libfaketime from stalling timed waits.
        faked = [f"LD_PRELOAD={FAKETIME}", f"FAKETIME={skew}", "DONT_FAKE_MONOTONIC=1"]
        clock = ["env", *faked] if skewed else []
        fleet.start("--concurrency", "4", "--wait", "1", prefix=clock)
    producers = start_producers(fleet, documents, tmp_path, seed)
    try:
        wait_until(lambda: sum(v for v, _ in versions().values()) > 300, "300 saves")
        if disruption == "sigkill":
            fleet.running()[0].kill()  # anywhere: in a run, a claim write, a settlement
            fleet.start("--concurrency", "4", "--wait", "1")
        elif disruption == "restart":
            restart_server_or_terminate(fleet.application_name)
        wait_until(lambda: sum(v for v, _ in versions().values()) > 1200, "1200 saves", timeout=120)
    finally:
        triggers = stop_producers(producers, tmp_path)
    # Quiet now: every document's last version is read, within windows and leases.
    runs = finished_runs(fleet, seed)
    close, overlapping = close_and_overlapping(runs)
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


def test_debounced_runs_wait_for_quiet_or_their_maximum_wait_and_lose_no_trigger(
    fleet: Fleet, documents: list[str], tmp_path: Path
) -> None:
    """Producers save in bursts and trigger with ``Debounce``; a worker is
    SIGKILLed part way. Judged by the database's clock: every run starts
    once its key was quiet ``QUIET`` seconds, or ``MAX_WAIT`` after the
    first trigger since the key's previous run; runs keep a window apart,
    never overlap, and every document's last version is read."""
    fleet.trailing = True
    seed = random.randrange(2**32)
    for _ in range(2):
        fleet.start("--concurrency", "4", "--wait", "1")
    producers = start_producers(fleet, documents, tmp_path, seed, debounce=[QUIET, MAX_WAIT])
    try:
        wait_until(lambda: sum(v for v, _ in versions().values()) > 150, "150 saves")
        fleet.running()[0].kill()
        fleet.start("--concurrency", "4", "--wait", "1")
        wait_until(lambda: sum(v for v, _ in versions().values()) > 500, "500 saves", timeout=120)
    finally:
        triggers = stop_producers(producers, tmp_path)
    runs = finished_runs(fleet, seed)
    with connection.cursor() as cursor:
        # When each run's claim was made (its window before the claim's end,
        # as the run's first statement read it): the moment debouncing let it go.
        cursor.execute("SELECT key, claim_ends FROM trailing_run ORDER BY key, started_at")
        claimed = [ends and ends - timedelta(seconds=WINDOW) for _, ends in cursor.fetchall()]
        cursor.execute("SELECT key, at FROM trailing_save ORDER BY key, at")
        saves = {
            k: [at for _, at in rows]
            for k, rows in itertools.groupby(cursor.fetchall(), key=lambda r: r[0])
        }
    early = 0
    released = iter(claimed)
    for key, of_key in itertools.groupby(runs, key=lambda run: run[0]):
        previous = None
        for _, _, start, _ in of_key:
            start = min(start, next(released) or start)
            before = [at for at in saves.get(key, []) if at < start]
            burst = [at for at in before if previous is None or at >= previous]
            quiet = not before or start - before[-1] >= timedelta(seconds=QUIET) - SLACK
            waited = bool(burst) and start - burst[0] >= timedelta(seconds=MAX_WAIT) - SLACK
            early += not (quiet or waited)
            previous = start
    close, overlapping = close_and_overlapping(runs)
    record_figures(
        "debounced_runs_sigkill",
        keys=KEYS,
        triggers=triggers,
        runs=len(runs),
        early_runs=early,
        close_runs=close,
        overlapping_runs=overlapping,
        seed=seed,
    )
    assert (early, close, overlapping) == (0, 0, 0), f"seed {seed}"
    assert len(runs) < triggers / 2  # the bursts coalesced
