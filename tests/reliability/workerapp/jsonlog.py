"""A log formatter writing one JSON object per record, with the record's
``event`` (and the other ``extra`` the app passes), so a test can read a
worker process's log as data (:func:`jsonl_logging` is the ``LOGGING``
setting of such a process)."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonLines(logging.Formatter):
    """``{"event", "level", "logger", "message", "pid", "extra", "exception"}``."""

    def format(self, record: logging.LogRecord) -> str:
        extra = {
            name: value if isinstance(value, str | int | float | bool | None) else repr(value)
            for name, value in record.__dict__.items()
            if name not in _STANDARD
        }
        entry = {
            "event": getattr(record, "event", None),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": os.getpid(),
            "extra": extra,
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def jsonl_logging(path: str | None, level: str = "DEBUG") -> dict[str, Any]:
    """``LOGGING`` sending the app's records at ``level`` and up to ``path``
    as JSON lines (nowhere without a path)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"jsonl": {"()": f"{__name__}.JsonLines"}},
        "handlers": {
            "events": (
                {"class": "logging.FileHandler", "filename": path, "formatter": "jsonl"}
                if path
                else {"class": "logging.NullHandler"}
            )
        },
        "loggers": {"astral_taskclaim": {"handlers": ["events"], "level": level}},
    }
