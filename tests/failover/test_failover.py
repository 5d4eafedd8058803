"""Claimed enqueues and workers across planned and unplanned failovers of
a pg_auto_failover cluster with synchronous replication, under load.

Producers record, client side, every enqueue the database acknowledged
(its key, claim token, and when it was sent and answered); the task records
every run in memory, outside the database. After the failovers the load
drains and the audit asks: was every acknowledged message run (nothing
lost), and did any key get a second claim while an acknowledged one still
held it (a claim lost with a commit lets a key run twice in a window)?
``TASKCLAIM_FAILOVERS`` (default 2: one planned, one unplanned) sets how
many failovers, alternating. With ``TASKCLAIM_FAILOVER_ASYNC=1`` (``make
failover``) a second test takes the standby out of the synchronous quorum
and measures what one kill of the primary loses.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import DatabaseError, connection
from django.test import override_settings

from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.queues import queues
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks import registry
from astral_taskclaim.worker.loop import Worker
from tests.failover.cluster import Cluster

pytestmark = [pytest.mark.django_db(transaction=True)]

FAILOVERS = int(os.environ.get("TASKCLAIM_FAILOVERS", "2"))
KEYS = 20
WINDOW = 1.0  # seconds: each key is claimed again many times in a run
WORKERS = 2
#: Longest wait for the load to drain once the failovers are over.
DRAIN_DEADLINE = 180.0


@dataclass(frozen=True)
class Ack:
    """An enqueue the database acknowledged."""

    key: str
    seq: int
    token: str
    sent: float
    answered: float


class Runs:
    """Every run of the task, recorded in memory (no database involved)."""

    def __init__(self) -> None:
        self.seqs: list[int] = []
        self.changed = threading.Condition()

    def __call__(self, task: dict[str, Any]) -> None:
        with self.changed:
            self.seqs.append(task["seq"])
            self.changed.notify_all()

    def await_all(self, wanted: set[int], *, within: float = DRAIN_DEADLINE) -> set[int]:
        """Until every seq of ``wanted`` has run (or ``within`` seconds); those not run."""
        deadline = time.monotonic() + within
        with self.changed:
            while missing := wanted - set(self.seqs):
                if not self.changed.wait(max(0.0, deadline - time.monotonic())):
                    return missing
            return set()


@pytest.fixture
def jobs() -> Iterator[tuple[PostgresQueue, Runs]]:
    """Queue ``jobs`` with short leases (a batch whose worker lost its
    connection comes back soon) and its recording task."""
    name = f"failover-{uuid.uuid4().hex[:12]}"
    backend = "astral_taskclaim.queues.postgres.PostgresQueue"
    options = {"queue_name": name, "visibility_timeout": 5, "poll_interval": 0.5}
    runs = Runs()
    with override_settings(TASKCLAIM_QUEUES={"jobs": {"BACKEND": backend, "OPTIONS": options}}):
        registry.task(queue="jobs", name="tests.failover.jobs", max_retries=5)(runs)
        try:
            queue = queues["jobs"]
            assert isinstance(queue, PostgresQueue)
            yield queue, runs
        finally:
            registry.unregister("jobs")


class Producer(threading.Thread):
    """Enqueues claimed tasks on ``KEYS`` keys in turn, as fast as the
    database answers; a failed enqueue is not acknowledged, and the next
    one reconnects (as Django does between requests)."""

    def __init__(self, queue: PostgresQueue) -> None:
        super().__init__(daemon=True)
        self.queue = queue
        self.acks: list[Ack] = []
        self.errors = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        seq = 0
        try:
            while not self.stopping.is_set():
                seq += 1
                key = f"k{seq % KEYS}"
                sent = time.time()
                try:
                    token = enqueue_claimed(self.queue, key, {"seq": seq}, window_seconds=WINDOW)
                except DatabaseError:
                    self.errors += 1
                    connection.close()
                    self.stopping.wait(0.05)
                    continue
                if token is not None:
                    self.acks.append(Ack(key, seq, token, sent, time.time()))
        finally:
            connection.close()

    def await_acks(self, more: int) -> None:
        """Until ``more`` enqueues beyond the current count are acknowledged."""
        wanted = len(self.acks) + more
        deadline = time.monotonic() + 60
        while len(self.acks) < wanted and time.monotonic() < deadline:
            self.stopping.wait(0.05)
        assert len(self.acks) >= wanted, "the producer made no progress"


def overlaps(acks: list[Ack]) -> list[tuple[Ack, Ack]]:
    """Pairs of acknowledged claims of one key where the second was surely
    taken while the first held it: answered before the first was sent plus
    the window (the server's claim times lie within sent..answered)."""
    found = []
    by_key: dict[str, list[Ack]] = {}
    for ack in sorted(acks, key=lambda a: a.sent):
        by_key.setdefault(ack.key, []).append(ack)
    for claims in by_key.values():
        for first, second in itertools.pairwise(claims):
            if second.answered < first.sent + WINDOW:
                found.append((first, second))
    return found


def run_worker(worker: Worker) -> None:
    try:
        worker.run()
    finally:
        connection.close()


def test_nothing_lost_and_no_window_shared_across_failovers(
    cluster: Cluster,
    jobs: tuple[PostgresQueue, Runs],
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue, runs = jobs
    workers = [Worker("jobs", batch_size=10, wait=1) for _ in range(WORKERS)]
    threads = [threading.Thread(target=run_worker, args=(w,), daemon=True) for w in workers]
    producer = Producer(queue)
    failovers: list[tuple[str, float]] = []
    with caplog.at_level(logging.INFO, logger="astral_taskclaim"):
        for thread in [*threads, producer]:
            thread.start()
        for number in range(FAILOVERS):
            producer.await_acks(50)
            started = time.monotonic()
            if number % 2 == 0:
                cluster.perform_failover()
                failovers.append(("planned", time.monotonic() - started))
            else:
                killed = cluster.kill_primary()
                producer.await_acks(20)  # writes resumed on the promoted standby
                failovers.append(("unplanned", time.monotonic() - started))
                cluster.restart(killed)
        producer.await_acks(50)
        producer.stopping.set()
        producer.join()
        missing = runs.await_all({ack.seq for ack in producer.acks})
        for worker in workers:
            worker.stop()
        for thread in threads:
            thread.join(60)
    connection.close()  # this thread's, opened before the failovers
    reconnects = sum(getattr(r, "event", None) == "worker.database_error" for r in caplog.records)
    print(
        f"\nfailover: {len(producer.acks)} acknowledged enqueues, {producer.errors} refused, "
        f"{len(runs.seqs)} runs, {reconnects} worker reconnects; failovers "
        + ", ".join(f"{kind} {seconds:.1f} s" for kind, seconds in failovers)
    )
    assert missing == set(), f"{len(missing)} acknowledged messages never ran"
    assert overlaps(producer.acks) == []
    assert all(not thread.is_alive() for thread in threads)


@pytest.mark.skipif(os.environ.get("TASKCLAIM_FAILOVER_ASYNC") != "1", reason="make failover")
def test_without_synchronous_replication_a_kill_loses_only_the_last_commits(
    cluster: Cluster, jobs: tuple[PostgresQueue, Runs]
) -> None:
    """Measures what one unplanned failover loses with the standby out of the
    synchronous quorum: acknowledged enqueues that never ran, and how long
    before the kill their commits were answered (the loss window)."""
    queue, runs = jobs
    cluster.set_synchronous(False)
    workers = [Worker("jobs", batch_size=10, wait=1) for _ in range(WORKERS)]
    threads = [threading.Thread(target=run_worker, args=(w,), daemon=True) for w in workers]
    producer = Producer(queue)
    try:
        for thread in [*threads, producer]:
            thread.start()
        producer.await_acks(200)
        killed_at = time.time()
        killed = cluster.kill_primary()
        producer.await_acks(50)
        producer.stopping.set()
        producer.join()
        # What is lost never runs: wait for the rest, not for ever.
        missing = runs.await_all({ack.seq for ack in producer.acks}, within=45)
        for worker in workers:
            worker.stop()
        for thread in threads:
            thread.join(60)
        cluster.restart(killed)
    finally:
        cluster.set_synchronous(True)
        connection.close()
    lost = [ack for ack in producer.acks if ack.seq in missing]
    window_ms = (killed_at - min(ack.answered for ack in lost)) * 1000 if lost else 0.0
    print(
        f"\nasynchronous replication: {len(producer.acks)} acknowledged enqueues, "
        f"{len(lost)} lost, answered up to {window_ms:.0f} ms before the kill; "
        f"{len(overlaps(producer.acks))} windows shared"
    )
    assert all(ack.answered <= killed_at + 1 for ack in lost)  # only commits before the kill
