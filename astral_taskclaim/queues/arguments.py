"""Checks of the queue methods' arguments, the same for every backend.

``send(delay_seconds=...)``, ``receive(max_messages=..., wait_seconds=...)``,
``extend_leases(seconds=...)`` and a retry's delay are checked before any
I/O: a ``TypeError`` for the wrong type (``bool`` counts as one, though it is an ``int``), a
``ValueError`` for a value out of range, each naming the argument and the
range it must be in. Backends pass their own limits.
"""

from __future__ import annotations

import math

__all__ = [
    "delay_seconds",
    "lease_seconds",
    "max_messages",
    "wait_seconds",
    "whole_delay_seconds",
]


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, got {value!r}")
    return value


def delay_seconds(value: object, maximum: float) -> float:
    """A delay: a number of seconds from 0 to ``maximum``."""
    delay = _number("delay_seconds", value)
    if not 0 <= delay <= maximum:
        raise ValueError(f"delay_seconds must be in [0, {maximum:g}], got {delay}")
    return float(delay)


def whole_delay_seconds(value: object, maximum: int) -> int:
    """A delay as :func:`delay_seconds` checks it, rounded up to whole
    seconds for a queue that counts in seconds: a retry must never come
    early."""
    return math.ceil(delay_seconds(value, maximum))


def max_messages(value: object, limit: int) -> int:
    """The most messages one ``receive`` returns: an int from 1 to ``limit``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_messages must be an int, got {value!r}")
    if not 1 <= value <= limit:
        raise ValueError(f"max_messages must be from 1 to {limit}, got {value}")
    return value


def wait_seconds(value: object) -> float:
    """How long one ``receive`` may wait for a message: a finite number of
    seconds from 0."""
    wait = _number("wait_seconds", value)
    if not 0 <= wait < math.inf:
        raise ValueError(f"wait_seconds must be a finite number from 0, got {wait}")
    return float(wait)


def lease_seconds(value: object, maximum: float) -> float:
    """A lease's new length: a number of seconds above 0, at most ``maximum``."""
    seconds = _number("seconds", value)
    if not 0 < seconds <= maximum:
        raise ValueError(f"seconds must be above 0 and at most {maximum:g}, got {seconds}")
    return float(seconds)
