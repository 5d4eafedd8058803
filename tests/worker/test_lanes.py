"""Lanes: at most ``size`` items in progress, one key at a time, threads
started as items need them, and a suspended item holding no thread."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from astral_taskclaim.worker.lanes import Lanes
from tests.e2e.support import wait_for


class Suspending:
    """A lane's ``run`` that suspends each item (as an ``async def`` task
    handed to the event loop) and ends it when it is resumed."""

    def __init__(self) -> None:
        self.suspended: list[str] = []
        self.ended: list[str] = []
        self.changed = threading.Condition()

    def __call__(self, item: str) -> bool:
        with self.changed:
            if item in self.suspended:
                self.ended.append(item)
                self.changed.notify_all()
                return True
            self.suspended.append(item)
            self.changed.notify_all()
            return False

    def wait(self, test: Any) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: test(self), 30)


@pytest.fixture
def run() -> Suspending:
    return Suspending()


@contextmanager
def started(size: int, run: Callable[[str], bool]) -> Iterator[Lanes[str]]:
    """Lanes of ``size`` running ``run``, closed at the end of the block."""
    lanes: Lanes[str] = Lanes(size, run, name="test-lanes")
    try:
        yield lanes
    finally:
        lanes.close()


def test_suspended_items_hold_no_thread(run: Suspending) -> None:
    with started(5, run) as lanes:
        for n in range(5):
            lanes.put(f"k{n}", f"item {n}")
            run.wait(lambda r, n=n: len(r.suspended) == n + 1)
            wait_for(lambda: lanes.idle == 1, "the thread to be free again", timeout=30)
        # Five items in progress at once, each put when the one thread was free.
        assert lanes.threads == 1
        for item in run.suspended:
            lanes.resume(f"k{item[-1]}", item)
        run.wait(lambda r: len(r.ended) == 5)


def test_suspended_items_count_against_the_size(run: Suspending) -> None:
    with started(2, run) as lanes:
        for n in range(3):
            lanes.put(None, f"item {n}")
        run.wait(lambda r: len(r.suspended) == 2)
        assert lanes.backlog == 1  # the third waits for room, though a thread is free
        lanes.resume(None, run.suspended[0])
        run.wait(lambda r: len(r.suspended) == 3)  # one ended: the third started
        assert lanes.backlog == 0
        for item in run.suspended[1:]:
            lanes.resume(None, item)
        run.wait(lambda r: len(r.ended) == 3)


def test_a_key_stays_busy_while_its_item_is_suspended(run: Suspending) -> None:
    with started(4, run) as lanes:
        lanes.put("same", "first")
        lanes.put("same", "second")
        run.wait(lambda r: r.suspended == ["first"])
        assert lanes.backlog == 1  # "second" waits behind its key
        lanes.resume("same", "first")
        run.wait(lambda r: r.suspended == ["first", "second"])
        lanes.resume("same", "second")
        run.wait(lambda r: r.ended == ["first", "second"])


def test_sync_items_get_a_thread_each_up_to_the_size() -> None:
    lock, all_in, release = threading.Lock(), threading.Event(), threading.Event()
    running: list[str] = []
    peak = 0

    def block(item: str) -> bool:
        nonlocal peak
        with lock:
            running.append(item)
            peak = max(peak, len(running))
            if len(running) == 4:
                all_in.set()
        assert release.wait(30)
        with lock:
            running.remove(item)
        return True

    with started(4, block) as lanes:
        try:
            for n in range(6):
                lanes.put(None, f"item {n}")
            assert all_in.wait(30)  # four blocking items run at once
        finally:
            release.set()
    assert (lanes.threads, peak, lanes.backlog) == (4, 4, 0)


def test_a_resumed_item_gets_a_thread_while_the_others_run_long_tasks() -> None:
    release, resumed, lock = threading.Event(), threading.Event(), threading.Lock()
    suspended: list[str] = []
    running: list[str] = []

    def run(item: str) -> bool:
        if item == "async":
            if suspended:
                resumed.set()
                return True
            suspended.append(item)
            return False
        with lock:
            running.append(item)
        assert release.wait(60)  # a long sync task
        return True

    with started(3, run) as lanes:
        try:
            lanes.put(None, "async")
            wait_for(lambda: suspended and lanes.idle == 1, "the async item to suspend", timeout=30)
            for n in (1, 2):  # one at a time: the two threads busy, none idle
                lanes.put(None, f"sync {n}")
                wait_for(lambda n=n: len(running) == n, f"sync {n} to run", timeout=30)
            assert (lanes.threads, lanes.idle) == (2, 0)
            lanes.resume(None, "async")
            assert resumed.wait(10)  # not behind the sync tasks
        finally:
            release.set()


def test_lanes_of_one_run_their_items_on_the_calling_thread() -> None:
    ran: list[tuple[str, threading.Thread]] = []
    lanes: Lanes[str] = Lanes(1, lambda item: run(item), name="test-lanes")

    def run(item: str) -> bool:
        ran.append((item, threading.current_thread()))
        if item == "async":  # suspends: resumed from another thread
            threading.Thread(target=lanes.resume, args=("k", "async again")).start()
            return False
        return True

    lanes.put("k", "async")
    lanes.put("k", "sync")  # the async item's key again
    lanes.put(None, "other")
    assert ran == []  # nothing runs before the caller runs them
    lanes.run_here()  # returns once the suspended item was resumed and ended
    here = threading.current_thread()  # the suspended item held the one lane;
    # then the rest in the order put, a repeated key included (first in, first run)
    assert ran == [("async", here), ("async again", here), ("sync", here), ("other", here)]
    assert (lanes.threads, lanes.backlog) == (0, 0)
    lanes.close()
