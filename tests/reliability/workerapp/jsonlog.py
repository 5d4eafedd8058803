"""A log formatter writing one JSON object per record, with the record's
``event`` (and the other ``extra`` the app passes), so a test can read a
worker process's log as data."""

from __future__ import annotations

import json
import logging
import os

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
