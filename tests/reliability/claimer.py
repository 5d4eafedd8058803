"""Claimers hammering a few hot keys, for the exclusivity test: in threads
of the test process and, run as ``python -m tests.reliability.claimer``, in
processes of their own.

A claimer loops until told to stop: it claims a random hot key (now and
then inside a transaction that reads the claim table first, as an app's
request would); having got a token it sometimes holds it (``hold_task``, a retry due soon) and
sometimes releases it early (``release_task``). Each call is logged with
its outcome, so the test can compare the claims made with what the claim
table went through.

As a process, it reads its arguments as JSON from argv[1] (``keys``,
``window``, ``seed``; ``ready``, a path it creates once connected;
``stop``, a path whose existence means stop) and prints its log as JSON
on stdout when it stops.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass

from django.db import connection, transaction

from astral_taskclaim.claims.claim import claim_task, hold_task, release_task


@dataclass(frozen=True)
class Attempt:
    """One call: ``claim`` (``token`` is what it returned, maybe ``None``),
    ``hold`` or ``release`` (of ``token``)."""

    op: str
    key: str
    token: str | None
    claimer: str


def hammer(
    *,
    keys: list[str],
    window: float,
    seed: int,
    claimer: str,
    stop: Callable[[], bool],
    log: list[Attempt] | None = None,
) -> list[Attempt]:
    """Claims, holds and releases ``keys`` until ``stop()``; the log
    (``log``, appended to as it goes, so another thread can count it)."""
    rng = random.Random(seed)
    log = [] if log is None else log
    while not stop():
        key = rng.choice(keys)
        if rng.random() < 0.25:
            token = claim_late_in_a_transaction(key, window)
        else:
            token = claim_task(key, window_seconds=window)
        log.append(Attempt("claim", key, token, claimer))
        if token is None:
            continue
        roll = rng.random()
        if roll < 0.2:
            hold_task(key, token, delay_seconds=window / 2, window_seconds=window)
            log.append(Attempt("hold", key, token, claimer))
        elif roll < 0.3:
            release_task(key, token)
            log.append(Attempt("release", key, token, claimer))
    return log


def claim_late_in_a_transaction(key: str, window: float) -> str | None:
    """Claims ``key`` in a transaction begun by an earlier statement."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM taskclaim.claim WHERE key = %s", [key])
        return claim_task(key, window_seconds=window)


def main() -> None:
    """The process entry point (see the module docstring)."""
    import os
    from pathlib import Path

    import django

    django.setup()
    from django.db import connection

    arguments = json.loads(sys.argv[1])
    stop_path = Path(arguments["stop"])
    connection.ensure_connection()
    Path(arguments["ready"]).touch()
    log = hammer(
        keys=arguments["keys"],
        window=arguments["window"],
        seed=arguments["seed"],
        claimer=f"process-{os.getpid()}",
        stop=stop_path.exists,
    )
    json.dump([asdict(attempt) for attempt in log], sys.stdout)


if __name__ == "__main__":
    main()
