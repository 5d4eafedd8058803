"""Internal: system checks of the settings' names (registered by
:mod:`astral_taskclaim.checks`), so a misspelled one is not silently ignored:
W008, a ``TASKCLAIM_*`` setting the app does not read; E016, a key a
``TASKCLAIM_QUEUES`` entry does not take. A bad ``OPTIONS`` key is the
backend's to report (E014)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from astral_taskclaim.core.conf import AppSettings, app_settings

#: A check id of this app, from its code ("E001").
CHECK_ID = "astral_taskclaim.{}"

_PREFIX = "TASKCLAIM_"

#: The keys of a ``TASKCLAIM_QUEUES`` entry, as the code reading them has
#: them: ``BACKEND`` and ``OPTIONS`` ``queues.create_queue``, ``HISTORY``
#: ``queues.runs.queue_history``, ``TIME_LIMIT`` ``queues.queue_time_limit``.
#: A backend is handed its ``OPTIONS`` only.
_QUEUE_KEYS = ("BACKEND", "OPTIONS", "HISTORY", "TIME_LIMIT")


def configured_queues() -> dict[str, Any] | None:
    """``TASKCLAIM_QUEUES``; ``None`` when the setting is malformed, which
    E006 reports (the checks reading it then say nothing)."""
    try:
        return app_settings.QUEUES
    except ImproperlyConfigured:
        return None


def _known_settings() -> list[str]:
    """The names of the settings the app reads: one per property of
    :class:`~astral_taskclaim.core.conf.AppSettings`, ``DATABASE`` reading
    ``TASKCLAIM_DATABASE``."""
    return sorted(
        f"{_PREFIX}{name}"
        for name, member in vars(AppSettings).items()
        if isinstance(member, property)
    )


def _closest(name: str, known: Sequence[str], *, prefix: str = "") -> str | None:
    """The one of ``known`` that ``name`` likely misspells: the same but for
    case, else difflib's closest (comparing what follows ``prefix``, which all
    share and would make any two look alike); ``None`` if none is close."""
    for candidate in known:
        if candidate.upper() == name.upper():
            return candidate
    tails = {candidate.removeprefix(prefix): candidate for candidate in known}
    found = difflib.get_close_matches(name.upper().removeprefix(prefix), list(tails), n=1)
    return tails[found[0]] if found else None


@checks.register()
def check_setting_names(**kwargs: Any) -> list[checks.CheckMessage]:
    """W008 for each ``TASKCLAIM_*`` setting the app does not read."""
    known = _known_settings()
    found: list[checks.CheckMessage] = []
    for name in dir(settings):
        if not name.startswith(_PREFIX) or name in known:
            continue
        close = _closest(name, known, prefix=_PREFIX)
        guess = "" if close is None else f"; did you mean {close}?"
        found.append(
            checks.Warning(
                f"setting {name} is not one astral_taskclaim reads, so it has no effect{guess}",
                hint=f"The app's settings are {', '.join(known)}. If this project reads "
                "the setting itself, silence astral_taskclaim.W008.",
                obj=name,
                id=CHECK_ID.format("W008"),
            )
        )
    return found


@checks.register()
def check_queue_keys(**kwargs: Any) -> list[checks.CheckMessage]:
    """E016 for each key of a ``TASKCLAIM_QUEUES`` entry that is no
    ``BACKEND``, ``OPTIONS``, ``HISTORY`` or ``TIME_LIMIT``."""
    found: list[checks.CheckMessage] = []
    allowed = ", ".join(_QUEUE_KEYS)
    for alias, config in (configured_queues() or {}).items():
        if not isinstance(config, dict):
            continue  # reported as E010
        for key in config:
            if key in _QUEUE_KEYS:
                continue
            close = _closest(key, _QUEUE_KEYS) if isinstance(key, str) else None
            guess = "" if close is None else f"; did you mean {close!r}?"
            found.append(
                checks.Error(
                    f"TASKCLAIM_QUEUES[{alias!r}] has unknown key {key!r}; allowed: "
                    f"{allowed}{guess}",
                    hint="A queue entry's keys are upper case; the backend's own options "
                    "go in its OPTIONS.",
                    obj=alias,
                    id=CHECK_ID.format("E016"),
                )
            )
    return found
