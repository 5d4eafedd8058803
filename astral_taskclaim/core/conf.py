"""The app's settings, read lazily from ``django.conf.settings``.

Every setting has a typed default here and nowhere else. Nothing is read at
import time: each attribute looks the setting up when it is used, so
``override_settings`` works and importing the app never touches settings.

====================================  =========================  ====================
Setting                               Type                       Default
====================================  =========================  ====================
``TASKCLAIM_DATABASE``                ``str`` (database alias)   ``"default"``
``TASKCLAIM_ADMIN_ROLE``              ``str | None``             ``None``
``TASKCLAIM_SERVICE_ROLE``            ``str | None``             ``None``
``TASKCLAIM_QUEUES``                  ``dict[str, dict]``        one PostgreSQL queue
``TASKCLAIM_DELAY_SCALE``             ``float`` in (0, 1]        ``1.0``
``TASKCLAIM_ASYNC_POOL``              ``int`` from 1             ``10``
``TASKCLAIM_TASK_RESULTS_RETENTION``  ``int`` seconds, ``None``  ``604800`` (7 days)
``TASKCLAIM_SCHEDULES``               ``dict[str, dict]``        ``{}``
``TASKCLAIM_UPKEEP``                  ``bool``                   ``True``
``TASKCLAIM_SENTRY``                  ``dict``                   see :attr:`~AppSettings.SENTRY`
====================================  =========================  ====================
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

_DEFAULT_QUEUE_BACKEND = "astral_taskclaim.queues.postgres.PostgresQueue"
_DEFAULT_TASK_RESULTS_RETENTION = 7 * 24 * 3600

# A PostgreSQL role name we are willing to quote into DDL. Quoting makes any
# name safe, but a conservative pattern catches typos early.
_ROLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$-]{0,62}$")


def _setting(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


def _role(name: str) -> str | None:
    value = _setting(name, None)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _ROLE_NAME.match(value):
        raise ImproperlyConfigured(
            f"{name} must be a PostgreSQL role name (letters, digits, _ $ -; at most 63), "
            f"got {value!r}"
        )
    return value


class AppSettings:
    """Typed, lazy accessors for the ``TASKCLAIM_*`` settings."""

    @property
    def DATABASE(self) -> str:
        """Alias of the database holding ``taskclaim.claim``."""
        value = _setting("TASKCLAIM_DATABASE", "default")
        if not isinstance(value, str) or value not in settings.DATABASES:
            raise ImproperlyConfigured(
                f"TASKCLAIM_DATABASE must name an entry of DATABASES, got {value!r}"
            )
        return value

    @property
    def ADMIN_ROLE(self) -> str | None:
        """Role owning the app's schemas, or ``None`` for the migrating user."""
        return _role("TASKCLAIM_ADMIN_ROLE")

    @property
    def SERVICE_ROLE(self) -> str | None:
        """Role the app connects as at run time, granted only the DML the claim table needs."""
        return _role("TASKCLAIM_SERVICE_ROLE")

    @property
    def QUEUES(self) -> dict[str, dict[str, Any]]:
        """Queue aliases, each ``{"BACKEND": dotted path, "OPTIONS": {...}}``."""
        value = _setting("TASKCLAIM_QUEUES", None)
        if value is None:
            return {"default": {"BACKEND": _DEFAULT_QUEUE_BACKEND}}
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise ImproperlyConfigured("TASKCLAIM_QUEUES must be a dict of alias → config dicts")
        return value

    @property
    def DELAY_SCALE(self) -> float:
        """Factor applied to retry delays; below 1 only for demos and tests."""
        value = _setting("TASKCLAIM_DELAY_SCALE", 1.0)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
            raise ImproperlyConfigured(
                f"TASKCLAIM_DELAY_SCALE must be a number in (0, 1], got {value!r}"
            )
        return float(value)

    @property
    def ASYNC_POOL(self) -> int:
        """Most connections the async functions open per event loop and database."""
        value = _setting("TASKCLAIM_ASYNC_POOL", 10)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ImproperlyConfigured(f"TASKCLAIM_ASYNC_POOL must be an int from 1, got {value!r}")
        return value

    @property
    def TASK_RESULTS_RETENTION(self) -> int | None:
        """Seconds a finished Django Task result is kept; ``None``: forever."""
        value = _setting("TASKCLAIM_TASK_RESULTS_RETENTION", _DEFAULT_TASK_RESULTS_RETENTION)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ImproperlyConfigured(
                "TASKCLAIM_TASK_RESULTS_RETENTION must be an int of seconds from 0 or None, "
                f"got {value!r}"
            )
        return value

    @property
    def SCHEDULES(self) -> dict[str, Any]:
        """Schedules of other apps' tasks, by name (read by the schedules package)."""
        value = _setting("TASKCLAIM_SCHEDULES", {})
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise ImproperlyConfigured(
                "TASKCLAIM_SCHEDULES must be a dict of name → schedule dicts"
            )
        return value

    @property
    def UPKEEP(self) -> bool:
        """Whether workers run the expired-claim cleanup and the results
        retention as built-in schedules where pg_cron is not loaded."""
        value = _setting("TASKCLAIM_UPKEEP", True)
        if not isinstance(value, bool):
            raise ImproperlyConfigured(f"TASKCLAIM_UPKEEP must be True or False, got {value!r}")
        return value

    @property
    def SENTRY(self) -> dict[str, Any]:
        """What is reported to Sentry when the project initialised ``sentry_sdk``:
        ``capture`` (``"failures"``: every failed attempt; ``"give_ups"``: the
        last one only; ``None``: none) and ``crons`` (schedules' check-ins)."""
        value = _setting("TASKCLAIM_SENTRY", {})
        if not isinstance(value, dict) or not set(value) <= set(_SENTRY_DEFAULT):
            raise ImproperlyConfigured(
                f"TASKCLAIM_SENTRY must be a dict with keys {sorted(_SENTRY_DEFAULT)}, "
                f"got {value!r}"
            )
        found = {**_SENTRY_DEFAULT, **value}
        if found["capture"] not in _SENTRY_CAPTURE or not isinstance(found["crons"], bool):
            raise ImproperlyConfigured(
                "TASKCLAIM_SENTRY['capture'] must be 'failures', 'give_ups' or None and "
                f"['crons'] True or False, got {value!r}"
            )
        return found


_SENTRY_DEFAULT: dict[str, Any] = {"capture": "failures", "crons": True}
_SENTRY_CAPTURE = ("failures", "give_ups", None)

app_settings = AppSettings()
