"""Queue backends, configured like ``CACHES``::

    TASKCLAIM_QUEUES = {
        "default": {"BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue"},
        "refresh": {
            "BACKEND": "astral_taskclaim.queues.sqs.SQSQueue",
            "OPTIONS": {"queue_url": "...", "region_name": "eu-west-1"},
        },
    }

``queues["refresh"]`` returns the configured backend (one instance per
thread). Without the setting there is one queue, ``default``, on PostgreSQL.
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from ..conf import app_settings
from .base import BaseQueue, MessageBatch, QueueError, QueueStatus, ReceivedMessage

__all__ = [
    "BaseQueue",
    "MessageBatch",
    "QueueError",
    "QueueStatus",
    "ReceivedMessage",
    "create_queue",
    "queues",
]


def create_queue(alias: str) -> BaseQueue:
    """A new backend instance for ``TASKCLAIM_QUEUES[alias]``."""
    configured = app_settings.QUEUES
    if alias not in configured:
        known = ", ".join(sorted(configured)) or "none"
        raise ImproperlyConfigured(f"unknown queue {alias!r}; TASKCLAIM_QUEUES has: {known}")
    config = configured[alias]
    if not isinstance(config, dict) or not isinstance(config.get("BACKEND"), str):
        raise ImproperlyConfigured(f"TASKCLAIM_QUEUES[{alias!r}] needs a BACKEND dotted path")
    try:
        backend = import_string(config["BACKEND"])
    except ImportError as error:
        raise ImproperlyConfigured(
            f"TASKCLAIM_QUEUES[{alias!r}]: cannot import BACKEND {config['BACKEND']!r}: {error}"
        ) from error
    if not (isinstance(backend, type) and issubclass(backend, BaseQueue)):
        raise ImproperlyConfigured(
            f"TASKCLAIM_QUEUES[{alias!r}]: BACKEND {config['BACKEND']!r} is not a BaseQueue"
        )
    options = config.get("OPTIONS", {})
    if not isinstance(options, dict):
        raise ImproperlyConfigured(f"TASKCLAIM_QUEUES[{alias!r}]['OPTIONS'] must be a dict")
    return backend(alias, options=options)


class QueueHandler:
    """``queues[alias]``: per-thread backend instances, reset when
    ``TASKCLAIM_QUEUES`` changes (``override_settings``)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _instances(self) -> dict[str, BaseQueue]:
        instances: dict[str, BaseQueue] | None = getattr(self._local, "instances", None)
        if instances is None:
            instances = self._local.instances = {}
        return instances

    def __getitem__(self, alias: str) -> BaseQueue:
        instances = self._instances()
        if alias not in instances:
            instances[alias] = create_queue(alias)
        return instances[alias]

    def __iter__(self) -> Any:
        return iter(app_settings.QUEUES)

    def all(self) -> list[BaseQueue]:
        """Every configured queue."""
        return [self[alias] for alias in self]

    def close_all(self) -> None:
        """Closes and forgets this thread's instances."""
        for queue in self._instances().values():
            queue.close()
        self._local.instances = {}


queues = QueueHandler()


def _reset(*, setting: str, **kwargs: Any) -> None:
    if setting == "TASKCLAIM_QUEUES":
        queues.close_all()


setting_changed.connect(_reset)
