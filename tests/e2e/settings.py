"""Settings of the end-to-end tests' worker subprocesses: the test settings,
the worker app, and the queue and delay scale the test passes in the
environment (``TASKCLAIM_E2E_QUEUES`` as JSON, ``TASKCLAIM_E2E_DELAY_SCALE``);
with ``TASKCLAIM_E2E_DOCS_LOGGING`` set, the ``LOGGING`` that
docs/observability.md recommends, read from the page as a project pastes it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.e2e.workerapp"]
TASKCLAIM_QUEUES = json.loads(os.environ["TASKCLAIM_E2E_QUEUES"])
# The suite's Django Tasks backend needs its queue; these workers run none.
TASKS: dict[str, object] = {}
TASKCLAIM_DELAY_SCALE = float(os.environ.get("TASKCLAIM_E2E_DELAY_SCALE", "1"))

if os.environ.get("TASKCLAIM_E2E_DOCS_LOGGING"):
    _page = (Path(__file__).parents[2] / "docs" / "observability.md").read_text(encoding="utf-8")
    (_block,) = [b for b in re.findall(r"```python\n(.*?)```", _page, re.S) if "LOGGING =" in b]
    exec(_block)
