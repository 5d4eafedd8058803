"""The JSON log formatter."""

from __future__ import annotations

import json
import logging

from astral_taskclaim.logging import JsonFormatter


def record(**extra: object) -> logging.LogRecord:
    made = logging.getLogger("astral_taskclaim.consumer.consume").makeRecord(
        "astral_taskclaim.consumer.consume",
        logging.INFO,
        __file__,
        1,
        "%s task %s failed (attempt %d); retrying in %s s",
        ("jobs", "project:42", 1, 30),
        None,
        extra=extra,
    )
    made.created = 0.0
    return made


def test_extra_fields_are_top_level_keys() -> None:
    line = JsonFormatter().format(
        record(event="queue.task_retrying", queue="jobs", key="project:42", attempts=1)
    )
    assert json.loads(line) == {
        "time": "1970-01-01T00:00:00.000+00:00",
        "level": "INFO",
        "logger": "astral_taskclaim.consumer.consume",
        "message": "jobs task project:42 failed (attempt 1); retrying in 30 s",
        "event": "queue.task_retrying",
        "queue": "jobs",
        "key": "project:42",
        "attempts": 1,
    }
    assert "\n" not in line


def test_an_exception_is_one_field_and_odd_values_become_text() -> None:
    made = record(event="queue.task_failed", when=object())
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        import sys

        made.exc_info = sys.exc_info()
    found = json.loads(JsonFormatter().format(made))
    assert found["exception"].splitlines()[-1] == "RuntimeError: boom"
    assert found["when"].startswith("<object object at")
