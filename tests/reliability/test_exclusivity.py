"""Exclusivity: however many threads and processes claim a hot key, at most
one token holds it at any moment, and a new token takes it only once the
previous claim has expired (or was released).

The load test records every write to ``taskclaim.claim`` with a trigger
(the token, the new expiry and the writing statement's start, the
``statement_timestamp()`` a call is judged by), replays that history key by
key and checks it against the log of every claim, hold and release the
claimers made. Some claims run inside a transaction that did other work
first, so a window timed from the transaction's start would show. The
state-machine test drives claim, hold, release and the passing of time
(expiries moved back, no sleeping) through random interleavings and
compares the table with a model after every step.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections, transaction
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from astral_taskclaim.claims.claim import claim_task, hold_task, release_task
from astral_taskclaim.core.envelope import is_token
from tests.claimkit import claims
from tests.reliability.audit import Write, claimed_windows, overlaps, writes
from tests.reliability.claimer import Attempt, hammer
from tests.reliability.processes import subprocess_env
from tests.reliability.support import ROOT, record_figures, sized, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

KEYS = sized(4, 8)
THREADS = sized(6, 16)
PROCESSES = sized(2, 4)
WINDOW = 0.2
WINDOWS_PER_KEY = sized(5, 40)
#: Claim attempts the threads make at least (the processes add theirs).
ATTEMPTS = sized(0, 1_000_000)


def start_process(number: int, keys: list[str], tmp: Path) -> tuple[subprocess.Popen[str], Path]:
    ready = tmp / f"claimer-{number}.ready"
    arguments = {
        "keys": keys,
        "window": WINDOW,
        "seed": number,
        "stop": str(tmp / "stop"),
        "ready": str(ready),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.claimer", json.dumps(arguments)],
        cwd=ROOT,
        env=subprocess_env(f"tc-claimer-{number}"),
        stdout=subprocess.PIPE,
        text=True,
    )
    return process, ready


@pytest.mark.usefixtures("audit")
def test_one_token_per_key_per_window_under_threads_and_processes(tmp_path: Path) -> None:
    keys = [f"hot:{n}:'%s\\" for n in range(KEYS)]
    stop = threading.Event()
    thread_logs: list[list[Attempt]] = [[] for _ in range(THREADS)]

    def claim_in_thread(number: int) -> None:
        try:
            hammer(
                keys=keys,
                window=WINDOW,
                seed=1000 + number,
                claimer=f"thread-{number}",
                stop=stop.is_set,
                log=thread_logs[number],
            )
        finally:
            connections.close_all()

    processes = [start_process(n, keys, tmp_path) for n in range(PROCESSES)]
    process_names = {f"tc-claimer-{n}" for n in range(PROCESSES)}
    threads = [threading.Thread(target=claim_in_thread, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: all(ready.exists() for _, ready in processes), "the claimer processes")
        start = max((w.id for w in writes()), default=0)
        wait_until(
            lambda: (
                (counts := claimed_windows(start))
                and len(counts) == KEYS
                and min(counts.values()) >= WINDOWS_PER_KEY
            ),
            f"{WINDOWS_PER_KEY} windows of every key",
            timeout=120,
        )
        # And every process has won a claim, so processes took part for sure.
        wait_until(
            lambda: {w.application for w in writes()} >= process_names,
            "a claim won by every process",
            timeout=120,
        )
        wait_until(
            lambda: sum(len(log) for log in thread_logs) >= ATTEMPTS,
            f"{ATTEMPTS:,} claim attempts",
            timeout=1200,
        )
    finally:
        stop.set()
        (tmp_path / "stop").touch()
        for thread in threads:
            thread.join()
    process_logs = []
    for process, _ in processes:
        out, _ = process.communicate(timeout=60)
        assert process.returncode == 0
        process_logs.append([Attempt(**entry) for entry in json.loads(out)])

    attempts = [a for log in thread_logs + process_logs for a in log]
    claims = [a for a in attempts if a.op == "claim"]
    won = [a.token for a in claims if a.token is not None]
    history = writes()
    assert overlaps(history, shortest=WINDOW) == []
    # Every token handed out is unique and is the one the table went through.
    assert len(won) == len(set(won))
    assert set(won) == {w.token for w in history}
    # Every claimer took part, processes included, and the keys were contested.
    assert all(log for log in thread_logs + process_logs)
    assert {w.application for w in history} >= process_names
    refused = sum(1 for a in claims if a.token is None)
    assert refused > 0
    assert len(claims) >= ATTEMPTS
    per_key = {key: sum(1 for a in claims if a.key == key and a.token) for key in keys}
    record_figures(
        "exclusivity_load",
        keys=KEYS,
        threads=THREADS,
        processes=PROCESSES,
        window_seconds=WINDOW,
        attempts=len(attempts),
        claim_attempts=len(claims),
        claims_won=len(won),
        claims_refused=refused,
        holds=sum(1 for a in attempts if a.op == "hold"),
        releases=sum(1 for a in attempts if a.op == "release"),
        fewest_windows_per_key=min(per_key.values()),
        overlaps=0,
    )


def test_the_replay_catches_an_overlap_and_a_foreign_delete() -> None:
    """The checker above is what the load test rests on: it must see a
    token taking a live key and a delete by a token that does not hold it."""
    at = datetime.fromisoformat("2030-01-01T00:00:00+00:00")
    later = datetime.fromisoformat("2030-01-01T00:00:01+00:00")
    history = [
        Write(1, "INSERT", "k", "a", later, at, ""),
        Write(2, "UPDATE", "k", "b", later, at, ""),  # a's claim runs to `later`
        Write(3, "DELETE", "k", "a", later, later, ""),
        Write(4, "UPDATE", "j", "c", later, at, ""),  # first sight of j: taken from nobody
    ]
    breaches = overlaps(history)
    assert len(breaches) == 2
    assert "took the key" in breaches[0]
    assert "did not hold" in breaches[1]
    # A 1 s window timed from before its statement (a transaction's start).
    short = [Write(5, "INSERT", "i", "d", later, at + timedelta(seconds=0.5), "")]
    breach = f"{short[0]}: written for less than 1.0 s from its statement"
    assert overlaps(short, shortest=1.0) == [breach]
    assert overlaps(short, shortest=0.5) == []


@pytest.mark.usefixtures("audit")
def test_the_audit_times_writes_by_their_statement() -> None:
    """A claim late in a transaction is recorded at its statement's time,
    with its whole window after it."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(0.05)")
        claim_task("late", window_seconds=1)
        cursor.execute("SELECT transaction_timestamp()")
        [(began,)] = cursor.fetchall()
    [write] = writes()
    assert write.started - began >= timedelta(seconds=0.05)
    assert write.expires_at - write.started == timedelta(seconds=1)
    assert overlaps([write], shortest=1.0) == []


# The state machine's keys, windows, delays and jumps in time. Every sum of
# them is a multiple of 15 s, so an expiry the model calls future is at
# least 15 s away: the real seconds an example takes never flip it.
MODEL_KEYS = ["job:1", "job'2\\", "100%s"]
WINDOWS = [0, 60, 3600]  # holds: a message may carry a 0 window
CLAIM_WINDOWS = WINDOWS[1:]  # claims refuse a 0 window; time jumps expire them
DELAYS = [0, 30, 90]
JUMPS = [45, 600, 10_000]
TOLERANCE = 5.0


class ClaimModel(RuleBasedStateMachine):
    """``taskclaim.claim`` against a dict of key → (token, seconds left)."""

    steps = 0
    tokens = Bundle("tokens")
    any_token = tokens | st.uuids().map(str)

    def __init__(self) -> None:
        super().__init__()
        self.model: dict[str, tuple[str, float]] = {}
        self.handed_out: set[str] = set()

    def live(self, key: str) -> bool:
        held = self.model.get(key)
        return held is not None and held[1] > 0

    @rule(target=tokens, key=st.sampled_from(MODEL_KEYS), window=st.sampled_from(CLAIM_WINDOWS))
    def claim(self, key: str, window: int) -> Any:
        ClaimModel.steps += 1
        token = claim_task(key, window_seconds=window)
        if self.live(key):
            assert token is None
            return multiple()
        assert token is not None
        assert is_token(token)
        assert token not in self.handed_out
        self.handed_out.add(token)
        self.model[key] = (token, window)
        return token

    @rule(
        key=st.sampled_from(MODEL_KEYS),
        token=any_token,
        delay=st.sampled_from(DELAYS),
        window=st.sampled_from(WINDOWS),
    )
    def hold(self, key: str, token: str, delay: int, window: int) -> None:
        ClaimModel.steps += 1
        hold_task(key, token, delay_seconds=delay, window_seconds=window)
        held = self.model.get(key)
        if held is None or held[0] == token:  # a freed key is taken again; a later claim stays
            self.model[key] = (token, delay + window)

    @rule(key=st.sampled_from(MODEL_KEYS), token=any_token)
    def release(self, key: str, token: str) -> None:
        ClaimModel.steps += 1
        release_task(key, token)
        held = self.model.get(key)
        if held is not None and held[0] == token:
            del self.model[key]

    @rule(key=st.sampled_from(MODEL_KEYS), seconds=st.sampled_from(JUMPS))
    def time_passes(self, key: str, seconds: int) -> None:
        """Moves the key's expiry ``seconds`` into the past, as waiting would."""
        ClaimModel.steps += 1
        with connection.cursor() as cursor:
            cursor.execute(
                """UPDATE taskclaim.claim
                   SET expires_at = expires_at - make_interval(secs => %s) WHERE key = %s""",
                [seconds, key],
            )
        if key in self.model:
            token, left = self.model[key]
            self.model[key] = (token, left - seconds)

    @invariant()
    def table_matches_model(self) -> None:
        table = claims()
        assert {key: token for key, (token, _) in table.items()} == {
            key: token for key, (token, _) in self.model.items()
        }
        for key, (_, left) in table.items():
            assert abs(left - self.model[key][1]) < TOLERANCE, (key, left, self.model[key])

    def teardown(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM taskclaim.claim WHERE key = ANY(%s)", [MODEL_KEYS])


def test_claim_hold_release_and_expiry_follow_the_model(clean_tables: None) -> None:
    examples = sized(30, 400)
    ClaimModel.steps = 0
    run_state_machine_as_test(
        ClaimModel,
        settings=settings(
            max_examples=examples,
            stateful_step_count=sized(25, 60),
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
            database=None,
        ),
    )
    assert ClaimModel.steps > examples
    record_figures("exclusivity_model", examples=examples, steps=ClaimModel.steps)
