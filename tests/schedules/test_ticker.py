"""Workers enqueueing due slots: once per slot however many take part,
coalescing with a held key, missed slots, and failures kept apart."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from django.db import connections

from astral_taskclaim.schedules import Scheduler, cron, every
from astral_taskclaim.schedules.schedule import Schedule
from astral_taskclaim.schedules.ticker import RETRY_SECONDS
from astral_taskclaim.tasks import ClaimedTask
from tests.claimkit import django_pid, terminate
from tests.schedules.kit import START, Clock, claimed, message_keys, record, sched_queue

__all__ = ["sched_queue"]

pytestmark = pytest.mark.django_db(transaction=True)


def per_slot(task: ClaimedTask[Any], **options: Any) -> Schedule:
    """A schedule of ``task`` every second, a task key per slot."""
    return Schedule("per-slot", every(1), task, "report:{slot}", task={"n": 1}, **options)


def test_each_slot_is_enqueued_once_however_many_workers_tick(sched_queue: str) -> None:
    schedule = per_slot(claimed())
    clock = Clock()
    schedulers = [Scheduler(include=[schedule], clock=clock) for _ in range(4)]
    won = []
    for _ in range(30):
        barrier = threading.Barrier(len(schedulers))

        def tick(scheduler: Scheduler, barrier: threading.Barrier) -> None:
            barrier.wait()
            try:
                won.append(scheduler.tick())
            finally:
                connections.close_all()

        threads = [threading.Thread(target=tick, args=(s, barrier)) for s in schedulers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        clock.advance(1)
    keys = message_keys(sched_queue)
    assert len(keys) == len(set(keys)) == 30 == sum(won)
    assert keys[0] == "report:2026-12-01T09:00:00Z"
    assert record("per-slot") == (clock.now.replace(second=29), "enqueued", 30)


def test_a_slot_whose_key_an_event_holds_coalesces_with_it(sched_queue: str) -> None:
    task = claimed(window_seconds=300)
    assert task.enqueue("report", {"by": "event"}) is not None
    scheduler = Scheduler(include=[Schedule("hourly", cron("0 * * * *"), task, "report", task={})])
    scheduler.clock = Clock()
    assert scheduler.tick() == 1
    assert message_keys(sched_queue) == ["report"]  # the event's message, run once
    assert record("hourly") == (START, "coalesced", 1)


def test_a_restarted_worker_does_not_enqueue_a_slot_again(sched_queue: str) -> None:
    schedule = per_slot(claimed())
    clock = Clock()
    assert Scheduler(include=[schedule], clock=clock).tick() == 1
    assert Scheduler(include=[schedule], clock=clock).tick() == 0
    assert len(message_keys(sched_queue)) == 1


def test_slots_seen_late_but_in_grace_are_each_enqueued(sched_queue: str) -> None:
    schedule = per_slot(claimed(), grace_seconds=60)
    clock = Clock()
    Scheduler(include=[schedule], clock=clock).tick()
    clock.advance(5)  # the database was restarting: no worker could write
    assert Scheduler(include=[schedule], clock=clock).tick() == 5
    assert len(message_keys(sched_queue)) == 6


@pytest.mark.parametrize(("missed", "enqueued"), [("once", 1), ("skip", 0)])
def test_slots_missed_while_every_worker_was_down(
    sched_queue: str, missed: str, enqueued: int
) -> None:
    schedule = Schedule(
        "every-10", every(10), claimed(), "report:{slot}", task={}, missed=missed, grace_seconds=2
    )
    clock = Clock()
    Scheduler(include=[schedule], clock=clock).tick()
    clock.advance(65)  # six slots came and went with no worker running
    assert Scheduler(include=[schedule], clock=clock).tick() == enqueued
    keys = message_keys(sched_queue)
    assert keys[0] == "report:2026-12-01T09:00:00Z"
    assert keys[1:] == ["report:2026-12-01T09:01:00Z"] * enqueued
    clock.advance(5)  # the next slot is on time: enqueued either way
    assert Scheduler(include=[schedule], clock=clock).tick() == 1
    assert message_keys(sched_queue)[-1] == "report:2026-12-01T09:01:10Z"


def test_a_new_schedule_starts_at_its_latest_slot_and_never_backfills(sched_queue: str) -> None:
    schedule = per_slot(claimed(), grace_seconds=300)
    clock = Clock()
    clock.advance(120.5)
    assert Scheduler(include=[schedule], clock=clock).tick() == 1
    assert message_keys(sched_queue) == ["report:2026-12-01T09:02:00Z"]


def test_nothing_is_asked_of_the_database_between_slots(
    sched_queue: str, django_assert_num_queries: Any
) -> None:
    clock = Clock()
    scheduler = Scheduler(include=[per_slot(claimed())], clock=clock)
    scheduler.tick()
    clock.advance(0.9)
    with django_assert_num_queries(0):
        assert scheduler.tick() == 0


def test_a_failing_schedule_is_logged_and_the_others_go_on(
    sched_queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> None:
        raise RuntimeError("upkeep broke")

    ran: list[int] = []
    schedules = [
        Schedule("a-broken", every(60), broken, "a-broken"),
        Schedule("b-works", every(60), lambda: ran.append(1), "b-works"),
    ]
    with caplog.at_level(logging.INFO, logger="astral_taskclaim.schedules"):
        assert Scheduler(include=schedules, clock=Clock()).tick() == 2
    assert ran == [1]
    assert record("a-broken") == (START, "failed", 1)
    assert record("b-works") == (START, "ran", 1)
    events = [r.__dict__.get("event") for r in caplog.records]
    assert events.count("schedule.failed") == 1
    assert events.count("schedule.slot_enqueued") == 2


def test_each_slot_enqueue_logs_one_event(
    sched_queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="astral_taskclaim.schedules"):
        Scheduler(include=[per_slot(claimed())], clock=Clock()).tick()
    (found,) = [r for r in caplog.records if r.__dict__.get("event") == "schedule.slot_enqueued"]
    assert (found.schedule, found.slot, found.outcome) == (  # type: ignore[attr-defined]
        "per-slot",
        "2026-12-01T09:00:00Z",
        "enqueued",
    )


def test_a_terminated_connection_is_replaced_for_the_next_try(sched_queue: str) -> None:
    clock = Clock()
    scheduler = Scheduler(include=[per_slot(claimed())], clock=clock)
    terminate(django_pid())  # what a server restart does to an idle worker's connection
    assert scheduler.tick() == 0  # reading the schedule's record failed: logged
    clock.advance(RETRY_SECONDS)
    assert scheduler.tick() == 1  # reconnected
    assert message_keys(sched_queue) == ["report:2026-12-01T09:00:05Z"]
