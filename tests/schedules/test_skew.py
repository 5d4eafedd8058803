"""Workers whose clocks disagree by more than a slot claim lives: each slot
is still enqueued once, whoever sees it first, because the schedule's record
moves forward only, in the transaction of the enqueue.

In one process with clocks the test moves (the claims' expiry, the
database's time, moved with them), and in two ticker processes, one under
``faketime`` (Debian's ``faketime``; skipped where it is not installed).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection

from astral_taskclaim.schedules import Scheduler, every
from astral_taskclaim.schedules.schedule import Schedule
from tests.schedules.kit import START, Clock, claimed, message_keys, record, sched_queue
from tests.workerkit import ROOT, worker_env

__all__ = ["sched_queue"]

pytestmark = pytest.mark.django_db(transaction=True)

#: Far beyond the claim's life (grace plus a minute): what doubled every slot.
SKEW = 70


def age_claims(seconds: float) -> None:
    """What ``seconds`` of the database's time do to the claims: nearer expiry."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE taskclaim.claim SET expires_at = expires_at - make_interval(secs => %s)",
            [seconds],
        )


def test_a_worker_far_ahead_and_one_on_time_enqueue_each_slot_once(sched_queue: str) -> None:
    schedule = Schedule("skew", every(1), claimed(), "skew:{slot}", task={}, grace_seconds=5)
    ahead, on_time = Clock(START + timedelta(seconds=SKEW)), Clock()
    fast = Scheduler(include=[schedule], clock=ahead)
    slow = Scheduler(include=[schedule], clock=on_time)
    won = {"fast": 0, "slow": 0}
    for _ in range(SKEW + 10):
        won["fast"] += fast.tick()
        won["slow"] += slow.tick()
        for clock in (ahead, on_time):
            clock.advance(1)
        age_claims(1)
    keys = Counter(message_keys(sched_queue))
    assert [key for key, count in keys.items() if count > 1] == []
    # The on-time worker reached the fast one's slots once their claims had
    # expired (the last ten steps) and enqueued none of them.
    assert won == {"fast": SKEW + 10, "slow": 0}
    assert len(keys) == SKEW + 10
    last = START + timedelta(seconds=2 * SKEW + 9)
    assert record("skew") == (last, "enqueued", SKEW + 10)


def test_a_worker_behind_never_goes_back_to_an_older_slot(sched_queue: str) -> None:
    schedule = Schedule("skew", every(1), claimed(), "skew:{slot}", task={}, grace_seconds=300)
    behind = Clock()
    slow = Scheduler(include=[schedule], clock=behind)
    assert slow.tick() == 1  # START: the record knows it
    ahead = Clock(START + timedelta(seconds=10))
    assert Scheduler(include=[schedule], clock=ahead).tick() == 10  # in grace: each enqueued
    age_claims(3600)  # an hour on: every slot claim has expired
    behind.advance(5)  # slots the fast worker enqueued, well within this one's grace
    assert slow.tick() == 0
    assert len(message_keys(sched_queue)) == 11


FAKETIME = shutil.which("faketime")


@pytest.mark.skipif(FAKETIME is None, reason="needs faketime (Debian package faketime)")
def test_two_processes_whose_clocks_disagree_enqueue_each_slot_once(
    sched_queue: str, tmp_path: Path
) -> None:
    """Two ticker processes (tests/schedules/skewed_ticker.py), one 3 s
    ahead under faketime; the slot claim lives 1 s there (grace 1 s, no
    margin) so a skew of seconds outlives it, as 70 s outlive 65 s."""
    assert FAKETIME is not None
    skew = 3
    env = worker_env("tests.settings", "test-skew", SKEWED_TICKER_QUEUE=sched_queue)
    command = [sys.executable, "-m", "tests.schedules.skewed_ticker"]
    logs = [tmp_path / "fast.log", tmp_path / "on-time.log"]
    started: list[subprocess.Popen[str]] = []
    try:
        for prefix, log in zip([[FAKETIME, "-f", f"+{skew}s"], []], logs, strict=True):
            with log.open("wb") as stderr:
                started.append(
                    subprocess.Popen(
                        [*prefix, *command],
                        cwd=ROOT,
                        env=env,
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=stderr,
                        text=True,
                    )
                )
        pipes = [(process.stdin, process.stdout) for process in started]
        for _, stdout in pipes:  # each says when Django is set up
            assert stdout is not None
            assert stdout.readline() == "ready\n", [log.read_text() for log in logs]
        end = datetime.now(UTC) + timedelta(seconds=skew + 3)
        for stdin, _ in pipes:
            assert stdin is not None
            stdin.write(f"{end.timestamp()}\n")
            stdin.close()
        printed = [stdout.read() for _, stdout in pipes if stdout is not None]
        codes = [process.wait(60) for process in started]
    finally:
        for process in started:
            process.kill()
            process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    pipe.close()
    assert codes == [0, 0], [log.read_text() for log in logs]
    out = [json.loads(text) for text in printed]
    keys = Counter(message_keys(sched_queue))
    assert [key for key, count in keys.items() if count > 1] == [], out
    fast, slow = out
    # From the fast one's first slot on, none is missing. (Slots before it
    # the on-time one had not enqueued yet are not gone back to: older
    # than the record's, as a new schedule starts at its latest slot.)
    since = min(datetime.fromisoformat(s) for s in fast["enqueued"])
    enqueued = (datetime.fromisoformat(key.removeprefix("skew:")) for key in keys)
    slots = sorted(slot for slot in enqueued if slot >= since)
    assert len(slots) == (slots[-1] - since).total_seconds() + 1
    # The on-time process ticked through slots the fast one had enqueued
    # seconds before (their claims long expired), and enqueued none of them.
    behind = datetime.fromtimestamp(slow["first"], UTC) + timedelta(seconds=skew + 1)
    overlap = [s for s in fast["enqueued"] if datetime.fromisoformat(s) > behind]
    assert overlap, out
    assert not set(overlap) & set(slow["enqueued"])
