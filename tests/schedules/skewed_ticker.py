"""A ticker process for tests/schedules/test_skew.py: ticks a one-second
schedule on its own clock (``faketime`` may move it) until that clock
reaches the instant read from stdin, then prints what it enqueued as JSON.

Its slot claims live one second (grace 1 s, no margin), so that a skew of
seconds outlives them, as 70 s outlive the grace plus a minute.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from datetime import UTC, datetime
from unittest import mock

import django


class _Enqueued(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.slots: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.__dict__.get("event") == "schedule.slot_enqueued":
            self.slots.append(record.__dict__["slot"])


def main() -> None:
    django.setup()
    from django.test import override_settings

    from astral_taskclaim.schedules import Scheduler, every
    from astral_taskclaim.schedules.schedule import Schedule
    from tests.schedules.kit import POSTGRES, claimed

    enqueued = _Enqueued()
    logging.getLogger("astral_taskclaim.schedules").addHandler(enqueued)
    logging.getLogger("astral_taskclaim.schedules").setLevel(logging.INFO)
    queue = {"BACKEND": POSTGRES, "OPTIONS": {"queue_name": os.environ["SKEWED_TICKER_QUEUE"]}}
    queues = {"default": {"BACKEND": POSTGRES}, "sched": queue}
    margin = mock.patch("astral_taskclaim.schedules.ticker.SLOT_MARGIN", 0.0)
    with override_settings(TASKCLAIM_QUEUES=queues), margin:
        schedule = Schedule("skew", every(1), claimed(), "skew:{slot}", task={}, grace_seconds=1)
        scheduler = Scheduler(include=[schedule])
        print("ready", flush=True)
        end = datetime.fromtimestamp(float(sys.stdin.readline()), UTC)
        first = datetime.now(UTC)
        while datetime.now(UTC) < end:
            scheduler.tick()
            time.sleep(0.05)  # a worker's loop turn
    print(json.dumps({"first": first.timestamp(), "enqueued": enqueued.slots}), flush=True)


if __name__ == "__main__":
    main()
