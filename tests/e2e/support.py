"""Helpers of the end-to-end tests that run ``manage.py`` subprocesses."""

from __future__ import annotations

import time
from collections.abc import Callable
from urllib.parse import quote, urlencode

import pytest
from django.db import connection

DEADLINE = 60.0


def wait_for(condition: Callable[[], object], what: str, timeout: float = DEADLINE) -> None:
    """Polls ``condition`` until it is true; fails naming ``what`` after ``timeout``."""
    ends = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > ends:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def database_url(application_name: str) -> str:
    """The test database's URL, for the worker's ``DATABASE_URL``."""
    settings = connection.settings_dict
    query = {k: str(v) for k, v in settings["OPTIONS"].items() if isinstance(v, str | int)}
    query["application_name"] = application_name
    user = quote(settings["USER"] or "", safe="")
    password = f":{quote(settings['PASSWORD'], safe='')}" if settings["PASSWORD"] else ""
    host = settings["HOST"] or ""
    if host.startswith("/"):
        query["host"], host = host, ""
    port = f":{settings['PORT']}" if settings["PORT"] else ""
    return f"postgres://{user}{password}@{host}{port}/{settings['NAME']}?{urlencode(query)}"
