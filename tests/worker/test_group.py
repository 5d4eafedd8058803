"""Several queues in one process: each with its own threads, one stop for
all, PostgreSQL still woken by NOTIFY, a remote queue beside it."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection, connections
from django.test import override_settings

from astral_taskclaim.queues import queues
from astral_taskclaim.tasks import registry
from astral_taskclaim.worker.group import WorkerGroup, consumed_queues

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

POSTGRES = "astral_taskclaim.queues.postgres.PostgresQueue"


@pytest.fixture
def two_queues() -> Iterator[tuple[str, str]]:
    """PostgreSQL queues ``slow`` and ``fast``; their rows and tasks go afterwards."""
    names = {alias: f"{alias}-{uuid.uuid4().hex}" for alias in ("slow", "fast")}
    config = {a: {"BACKEND": POSTGRES, "OPTIONS": {"queue_name": n}} for a, n in names.items()}
    with override_settings(TASKCLAIM_QUEUES=config):
        yield "slow", "fast"
    for alias in names:
        registry.unregister(alias)
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM taskclaim.message WHERE queue = ANY(%s)", [list(names.values())]
        )


def in_thread(run: Callable[[], object]) -> threading.Thread:
    def target() -> None:
        try:
            run()
        finally:
            connections.close_all()

    thread = threading.Thread(target=target)
    thread.start()
    return thread


def test_a_queue_of_slow_tasks_does_not_hold_up_another(two_queues: tuple[str, str]) -> None:
    fast_done = threading.Event()
    fast_ran: list[int] = []
    slow = registry.task(queue="slow", name="tests.slow", window_seconds=60)(
        lambda task: fast_done.wait(60)  # holds its one thread until fast is done
    )
    fast = registry.task(queue="fast", name="tests.fast", window_seconds=60)(
        lambda task: (fast_ran.append(task), len(fast_ran) == 5 and fast_done.set())
    )
    for n in range(3):
        slow.enqueue(f"s{n}", n)
    for n in range(5):
        fast.enqueue(f"f{n}", n)
    group = WorkerGroup(["slow", "fast"], burst=True, wait=0, caps={"slow": 1}, concurrency=2)
    assert [w.concurrency for w in group.workers] == [1, 2]
    group.run()
    assert sorted(fast_ran) == list(range(5))
    assert [w.stats.ok for w in group.workers] == [3, 5]


def test_one_stop_stops_every_queue_and_notify_still_wakes_each(
    two_queues: tuple[str, str],
) -> None:
    seen: dict[str, threading.Event] = {"slow": threading.Event(), "fast": threading.Event()}
    for alias in two_queues:
        registry.task(queue=alias, name=f"tests.{alias}", window_seconds=60)(
            lambda task, alias=alias: seen[alias].set()
        )
    group = WorkerGroup(list(two_queues), wait=2, concurrency=2)
    thread = in_thread(group.run)
    try:
        for alias in two_queues:
            registry.get(alias).enqueue(f"{alias}:1", 1)  # type: ignore[union-attr]
            assert seen[alias].wait(30)
        # Each queue waits on a LISTEN connection of its own.
        pids = [worker.backend.listener.backend_pid for worker in group.workers]  # type: ignore[attr-defined]
        assert None not in pids
        assert len(set(pids)) == 2
    finally:
        group.stop()
        thread.join(60)
    assert not thread.is_alive()
    assert [w.stats.ok for w in group.workers] == [1, 1]


def test_a_remote_queue_and_a_postgresql_queue_in_one_process(
    cloudflare_options: Callable[..., dict[str, Any]],
) -> None:
    name = f"pg-{uuid.uuid4().hex}"
    config = {
        "pg": {"BACKEND": POSTGRES, "OPTIONS": {"queue_name": name}},
        "cf": {
            "BACKEND": "astral_taskclaim.queues.cloudflare.CloudflareQueue",
            "OPTIONS": cloudflare_options(),
        },
    }
    ran: list[str] = []
    lock = threading.Lock()

    def record(task: Any) -> None:
        with lock:
            ran.append(task)

    try:
        with override_settings(TASKCLAIM_QUEUES=config):
            for alias in config:
                task = registry.task(queue=alias, name=f"tests.{alias}", window_seconds=60)(record)
                task.enqueue(f"{alias}:1", alias)
            assert consumed_queues([]) == ["pg", "cf"]  # every queue with a task
            group = WorkerGroup(consumed_queues([]), burst=True, wait=0, concurrency=2)
            group.run()
            queues["cf"].close()
    finally:
        for alias in config:
            registry.unregister(alias)
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [name])
    assert sorted(ran) == ["cf", "pg"]


def test_bad_arguments_name_the_queue(two_queues: tuple[str, str]) -> None:
    registry.task(queue="slow", name="tests.slow")(print)
    registry.task(queue="fast", name="tests.fast")(print)
    with pytest.raises(ValueError, match="queue 'fast': concurrency must be from 1 or more, got 0"):
        WorkerGroup(["slow", "fast"], caps={"fast": 0})
    with pytest.raises(ValueError, match="a WorkerGroup needs at least one queue"):
        WorkerGroup([])
    with pytest.raises(ValueError, match="a concurrency is given for queue 'other', not consumed"):
        WorkerGroup(["slow"], caps={"other": 2})
    registry.unregister("slow")
    registry.unregister("fast")
    with pytest.raises(LookupError, match="no configured queue has a claimed task"):
        consumed_queues([])


def test_a_queue_no_task_consumes_is_named_when_none_is_given(
    two_queues: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    # Its messages waited unseen: only `check --database` said so.
    registry.task(queue="slow", name="tests.slow")(print)
    with caplog.at_level(logging.WARNING, logger="astral_taskclaim"):
        assert consumed_queues([]) == ["slow"]
        assert consumed_queues(["slow"]) == ["slow"]  # named: left out on purpose
    found = [r for r in caplog.records if getattr(r, "event", "") == "worker.queue_not_consumed"]
    assert [r.queue for r in found] == ["fast"]  # type: ignore[attr-defined]


def left(alias: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM taskclaim.message WHERE queue = %s",
            [queues[alias].queue_name],  # type: ignore[attr-defined]
        )
        (count,) = cursor.fetchone()
    return int(count)


def test_max_messages_counts_every_queue_and_a_quiet_one_does_not_hold_the_exit(
    two_queues: tuple[str, str],
) -> None:
    """Each worker stopped after its own max_messages: a quiet queue's
    worker never did, and the process never exited."""
    ran: list[str] = []
    for alias in two_queues:
        registry.task(queue=alias, name=f"tests.{alias}", window_seconds=60)(ran.append)
    for n in range(3):
        registry.get("fast").enqueue(f"f{n}", f"f{n}")  # type: ignore[union-attr]
    group = WorkerGroup(list(two_queues), max_messages=2, wait=0.1)
    thread = in_thread(group.run)
    thread.join(60)
    if thread.is_alive():
        group.stop()
        thread.join(60)
        pytest.fail("the group did not stop after max_messages")
    assert sorted(ran) == ["f0", "f1"]
    assert [w.stats.received for w in group.workers] == [0, 2]
    assert left("fast") == 1


@pytest.mark.parametrize("concurrency", [1, 3])
def test_max_messages_is_exact_over_queues_receiving_at_once(
    two_queues: tuple[str, str], concurrency: int
) -> None:
    """Both workers may receive together: what one brings beyond the
    budget goes back at once, unrun."""
    ran: list[str] = []
    lock = threading.Lock()

    def record(task: str) -> None:
        with lock:
            ran.append(task)

    for alias in two_queues:
        task = registry.task(queue=alias, name=f"tests.{alias}", window_seconds=60)(record)
        for n in range(5):
            task.enqueue(f"{alias}{n}", alias)
    group = WorkerGroup(list(two_queues), max_messages=3, wait=0, concurrency=concurrency)
    group.run()
    assert len(ran) == 3
    assert sum(w.stats.received for w in group.workers) == 3
    assert left("slow") + left("fast") == 7
