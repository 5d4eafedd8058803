"""Worker processes that a benchmark started: what they used, and stopping
them.

:class:`Usage` reads one process's peak RSS (``VmHWM`` in
``/proc/<pid>/status``) and CPU time (``/proc/<pid>/stat``) at every poll
of the driver, so a worker that exits on its own is still measured up to
its last poll; :func:`stop` asks every worker still running to stop, all at
once, and kills those that do not within the timeout. Linux only, as the
benchmarks are.
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Usage", "cpu_seconds", "peak_rss", "stop"]


def _status(pid: int, field: str) -> int:
    """The number of ``field`` in process ``pid``'s ``/proc`` status (0
    when it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def peak_rss(pid: int) -> int:
    """The peak resident set of process ``pid`` so far, in bytes (0 when
    it is gone)."""
    return _status(pid, "VmHWM") * 1024


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of process ``pid`` so far (``None`` when
    it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after the command name
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Usage:
    """One worker process's peak RSS, threads and CPU time, read at every poll."""

    pid: int
    peak: int = 0
    #: The most threads the process had at one poll.
    threads: int = 0
    #: CPU time at the first poll that saw a task done, and at the last.
    first_cpu: float | None = None
    last_cpu: float | None = None

    def read(self, *, tasks_done: bool) -> None:
        """One poll; the CPU time counts from the first with ``tasks_done``."""
        self.peak = max(self.peak, peak_rss(self.pid))
        self.threads = max(self.threads, _status(self.pid, "Threads"))
        now = cpu_seconds(self.pid) if tasks_done else None
        if now is not None:
            self.first_cpu = now if self.first_cpu is None else self.first_cpu
            self.last_cpu = now

    @property
    def cpu(self) -> float | None:
        """CPU seconds while the tasks ran (start-up left out)."""
        if self.first_cpu is None or self.last_cpu is None:
            return None
        return self.last_cpu - self.first_cpu


def stop(procs: list[subprocess.Popen[bytes]], *, timeout: float) -> None:
    """SIGTERM to every process still running, then up to ``timeout``
    seconds each to exit before it is killed."""
    # All signalled before any is waited for: the workers shut down side by
    # side, not one after the other.
    running = [proc for proc in procs if proc.poll() is None]
    for proc in running:
        proc.send_signal(signal.SIGTERM)
    for proc in running:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
