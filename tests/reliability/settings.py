"""Settings of the reliability tests' subprocesses (workers and claimers):
the test settings plus the worker app, with the queues, delay scale and
JSON-lines log file the test passes in the environment."""

from __future__ import annotations

import json
import os

from tests.reliability.workerapp.jsonlog import jsonl_logging
from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.reliability.workerapp"]
TASKCLAIM_QUEUES = json.loads(os.environ.get("TASKCLAIM_RELIABILITY_QUEUES", "null"))
# The suite's Django Tasks backend needs its queue; these workers run none.
TASKS: dict[str, object] = {}
# The schedules test's TASKCLAIM_SCHEDULES (its target task registers with it).
TASKCLAIM_SCHEDULES = json.loads(os.environ.get("TASKCLAIM_RELIABILITY_SCHEDULES") or "{}")
TASKCLAIM_DELAY_SCALE = float(os.environ.get("TASKCLAIM_RELIABILITY_DELAY_SCALE", "1"))

LOGGING = jsonl_logging(os.environ.get("TASKCLAIM_RELIABILITY_EVENTS"), "DEBUG")
