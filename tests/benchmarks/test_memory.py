"""Row 7's sampling: only a running worker's memory counts."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest

from benchmarks.memory import resident_bytes, warm_samples


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    """A Python process, started (it said so), that runs until its stdin is
    closed."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    # Sampled before this, it may still be an exec under way, with a tiny RSS.
    assert process.stdout.readline() == b"ready\n"
    yield process
    process.stdout.close()
    if process.stdin and not process.stdin.closed:
        process.stdin.close()
    process.wait(timeout=30)


def exit_unreaped(process: subprocess.Popen[bytes]) -> None:
    """Lets ``process`` exit and waits for it without reaping it: it stays
    a zombie, as a worker does between its exit and the next ``poll()``."""
    assert process.stdin is not None
    process.stdin.close()
    os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)


def test_a_running_process_is_sampled(child: subprocess.Popen[bytes]) -> None:
    rss = resident_bytes(psutil.Process(child.pid))
    assert rss is not None
    assert rss > 1024 * 1024  # a Python interpreter's resident set


def test_an_exited_unreaped_process_is_not_sampled(child: subprocess.Popen[bytes]) -> None:
    watched = psutil.Process(child.pid)
    exit_unreaped(child)
    assert watched.memory_info().rss == 0  # what a plain reading would have counted
    assert resident_bytes(watched) is None


def test_a_reaped_process_is_not_sampled(child: subprocess.Popen[bytes]) -> None:
    watched = psutil.Process(child.pid)
    exit_unreaped(child)
    child.wait(timeout=30)
    assert resident_bytes(watched) is None


def test_warm_samples_start_after_a_tenth_of_the_messages() -> None:
    samples = [(1000, 50), (950, 60), (900, 70), (500, 72)]
    assert warm_samples(samples, 1000) == [70, 72]
    assert warm_samples(samples[:2], 1000) == [60]  # drained early: the last sample


def test_no_sample_at_all_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="before its memory could be sampled"):
        warm_samples([], 1000)
