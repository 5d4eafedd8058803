"""Settings of the failover tests' subprocesses (``consume_claimed`` workers
and the relay): the test settings plus :mod:`.workerapp`, with the queues,
the run-record directory and the JSON-lines log file the test passes in
the environment."""

from __future__ import annotations

import json
import os

from tests.reliability.workerapp.jsonlog import jsonl_logging
from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

__all__ = ["INSTALLED_APPS", "LOGGING", "TASKCLAIM_QUEUES"]

INSTALLED_APPS = [*INSTALLED_APPS, "tests.failover.workerapp"]
TASKCLAIM_QUEUES = json.loads(os.environ["TASKCLAIM_FAILOVER_QUEUES"])

LOGGING = jsonl_logging(os.environ.get("TASKCLAIM_FAILOVER_EVENTS"), "INFO")
