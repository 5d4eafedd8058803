"""Awaiting a log event another thread emits, instead of sleeping."""

from __future__ import annotations

import logging
import threading
from typing import Any


class EventWaiter(logging.Handler):
    """While installed (a context manager on the ``astral_taskclaim``
    logger), :meth:`wait` returns once a record with ``extra={"event":
    event}`` was logged; :attr:`records` holds those records."""

    def __init__(self, event: str) -> None:
        super().__init__(logging.DEBUG)
        self.event = event
        self.records: list[logging.LogRecord] = []
        self._seen = threading.Event()
        self._logger = logging.getLogger("astral_taskclaim")

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "event", None) == self.event:
            self.records.append(record)
            self._seen.set()

    def wait(self, timeout: float) -> bool:
        """Whether the event was logged within ``timeout`` seconds."""
        return self._seen.wait(timeout)

    def __enter__(self) -> EventWaiter:
        self._logger.addHandler(self)
        self._previous_level = self._logger.level
        if self._logger.getEffectiveLevel() > logging.WARNING:
            self._logger.setLevel(logging.WARNING)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._previous_level)
