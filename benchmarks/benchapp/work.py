"""The work of row 12's tasks, the same code for every system, and the
stamp each run leaves: a 20 ms wait (12.1, 12.2), ten task types (12.3)
and one ORM write (12.4).

Every task of row 12, whichever system runs it, calls one of these and
appends ``key<TAB>start<TAB>end`` (wall-clock seconds) to a file of its
process in ``$TASKCLAIM_BENCH_STAMPS``. The driver counts those lines to
know when a run is done and times it from the first start to the last end,
so each system is timed the same way, by its tasks and not by its tables
(whose "done" means something different in each). ``os.write`` on an
``O_APPEND`` descriptor: one line per call, whole, from any thread.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time

__all__ = ["DB_KIND", "IO_SECONDS", "KINDS", "aio_wait", "db_write", "io_wait", "kind_of", "mixed"]

#: What an I/O-bound task waits, an HTTP call's stand-in.
IO_SECONDS = 0.020
STAMP_DIR = "TASKCLAIM_BENCH_STAMPS"
#: Row 12.3's ten task types: six waits, two ORM writes, two bits of CPU.
KINDS = ("wait",) * 6 + ("write",) * 2 + ("cpu",) * 2
#: The ``kind`` of row 12.4's rows in ``bench_write`` (12.3's are 0 to 9).
DB_KIND = len(KINDS)

_fd: int | None = None
_fd_lock = threading.Lock()


def _stamp(key: str, started: float) -> None:
    global _fd
    if _fd is None:
        with _fd_lock:
            if _fd is None:
                path = os.path.join(os.environ[STAMP_DIR], f"{os.getpid()}.tsv")
                _fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(_fd, f"{key}\t{started!r}\t{time.time()!r}\n".encode())


def io_wait(key: str) -> None:
    """20 ms of blocking wait."""
    started = time.time()
    time.sleep(IO_SECONDS)
    _stamp(key, started)


async def aio_wait(key: str) -> None:
    """20 ms of waiting, the ``async def`` way."""
    started = time.time()
    await asyncio.sleep(IO_SECONDS)
    _stamp(key, started)


def _write(key: str, kind: int) -> None:
    """One row inserted, autocommit, as a view would."""
    # Imported at the call: a worker may import its task module (and so this
    # one) before Django's app registry is ready, and models need it ready.
    from .models import Write

    Write.objects.create(key=key, kind=kind)


def db_write(key: str) -> None:
    """Row 12.4's task: one ORM write, nothing else."""
    started = time.time()
    _write(key, DB_KIND)
    _stamp(key, started)


def kind_of(number: int) -> str:
    """What task type ``number`` (0 to 9) does."""
    return KINDS[number % len(KINDS)]


def mixed(number: int, key: str) -> None:
    """Task type ``number`` of row 12.3: a wait, an ORM write (one row
    inserted, autocommit, as a view would) or about a millisecond of CPU."""
    started = time.time()
    kind = kind_of(number)
    if kind == "wait":
        time.sleep(IO_SECONDS)
    elif kind == "write":
        _write(key, number)
    else:
        sum(i * i for i in range(20_000))
    _stamp(key, started)
