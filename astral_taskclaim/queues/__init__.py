"""Queue backends, configured like ``CACHES``::

    TASKCLAIM_QUEUES = {
        "default": {"BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue"},
        "refresh": {
            "BACKEND": "astral_taskclaim.queues.sqs.SQSQueue",
            "OPTIONS": {"queue_url": "...", "region_name": "eu-west-1"},
            "HISTORY": "failures",
            "TIME_LIMIT": 300,
        },
    }

``queues["refresh"]`` returns the configured backend (one instance per
thread), from a handler built like Django's ``caches``. Without the setting
there is one queue, ``default``, on PostgreSQL. ``HISTORY`` (``"all"``,
``"failures"`` or ``"none"``; default ``"all"``) is what the run history
keeps of the queue's claimed tasks (:mod:`.runs`). ``TIME_LIMIT`` (seconds
above 0, or ``None``, the default: no limit) is the time limit of the runs
of the queue's tasks that set none themselves
(:mod:`~astral_taskclaim.consumer.time_limits`).
"""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING, Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.connection import BaseConnectionHandler
from django.utils.functional import cached_property
from django.utils.module_loading import import_string

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.validation import validate_time_limit
from astral_taskclaim.queues.base import BaseQueue, QueueError, QueueStatus
from astral_taskclaim.queues.messages import MessageBatch, ReceivedMessage
from astral_taskclaim.queues.runs import queue_history

__all__ = [
    "BaseQueue",
    "MessageBatch",
    "QueueError",
    "QueueStatus",
    "ReceivedMessage",
    "create_queue",
    "queues",
]


def unknown_queue(alias: str) -> str:
    """The error message for ``alias`` missing from ``TASKCLAIM_QUEUES``."""
    known = ", ".join(sorted(app_settings.QUEUES)) or "none"
    return f"unknown queue {alias!r}; TASKCLAIM_QUEUES has: {known}"


def queue_time_limit(alias: str) -> float | None:
    """``TASKCLAIM_QUEUES[alias]["TIME_LIMIT"]``: the time limit of the runs
    of the queue's tasks that set none (``None`` when unset: no limit);
    ``ImproperlyConfigured`` naming it for a value that is none."""
    config = app_settings.QUEUES.get(alias)
    value = config.get("TIME_LIMIT") if isinstance(config, dict) else None
    try:
        return validate_time_limit(value, name=f"TASKCLAIM_QUEUES[{alias!r}]['TIME_LIMIT']")
    except (TypeError, ValueError) as error:
        raise ImproperlyConfigured(str(error)) from None


def check_queue(alias: str) -> list[checks.CheckMessage]:
    """The system checks of ``TASKCLAIM_QUEUES[alias]``: ``E010`` if it
    cannot be loaded, else its backend's own ``check()``."""
    try:
        queue = create_queue(alias)
    except ImproperlyConfigured as error:
        return [checks.Error(str(error), id="astral_taskclaim.E010")]
    return queue.check()


def create_queue(alias: str) -> BaseQueue:
    """A new backend instance for ``TASKCLAIM_QUEUES[alias]``."""
    configured = app_settings.QUEUES
    if alias not in configured:
        raise ImproperlyConfigured(unknown_queue(alias))
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
    # HISTORY and TIME_LIMIT are checked here too, so check_queue reports them.
    queue_history(alias)
    queue_time_limit(alias)
    return backend(alias, options=options)


if TYPE_CHECKING:
    # Generic in django-stubs only; Django's class takes no subscript.
    _Handler = BaseConnectionHandler[BaseQueue]
else:
    _Handler = BaseConnectionHandler


class QueueHandler(_Handler):
    """``queues[alias]``: the backend of ``TASKCLAIM_QUEUES[alias]``, one
    instance per thread, made on first use; Django's handler for ``caches``
    and ``connections``, here for queues.

    The settings are read afresh on every look-up of an alias not yet
    instantiated, and ``override_settings(TASKCLAIM_QUEUES=...)`` closes and
    forgets the instances, so tests get backends of the settings they set.
    """

    settings_name = "TASKCLAIM_QUEUES"
    exception_class = ImproperlyConfigured
    # One instance per thread, never shared with another thread through
    # asgiref's context: the PostgreSQL queue uses Django's connections,
    # which are per thread too.
    thread_critical = True

    @cached_property
    def settings(self) -> dict[str, dict[str, Any]]:
        """``TASKCLAIM_QUEUES``, or the one default PostgreSQL queue without it."""
        return app_settings.QUEUES

    def create_connection(self, alias: str) -> BaseQueue:
        """A new backend for ``alias``: :func:`create_queue`."""
        return create_queue(alias)

    def __getitem__(self, alias: str) -> BaseQueue:
        if alias not in self.settings:
            # Django's own message would speak of a "connection".
            raise ImproperlyConfigured(unknown_queue(alias))
        return super().__getitem__(alias)

    def reset(self) -> None:
        """Closes and forgets this thread's instances; the settings are read
        again on the next look-up."""
        try:
            self.close_all()
            for alias in self:
                with suppress(AttributeError):  # not instantiated in this thread
                    del self[alias]
        except ImproperlyConfigured:
            pass  # never read before, and invalid now: nothing was instantiated
        with suppress(AttributeError):  # never read
            del self.settings


queues = QueueHandler()


def _reset(*, setting: str, **kwargs: Any) -> None:
    if setting == "TASKCLAIM_QUEUES":
        queues.reset()


setting_changed.connect(_reset)
