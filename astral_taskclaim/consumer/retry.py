"""The retry schedule of failed claimed tasks, as the TypeScript package has it.

A failed task is retried after 30 seconds, doubling with each attempt, or
after the longer wait the failure asks for (a ``Retry-After``), and never
later than 12 hours (Cloudflare Queues' longest retry delay).
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = [
    "BASE_RETRY_DELAY_SECONDS",
    "MAX_RETRY_DELAY_SECONDS",
    "requested_wait_ms",
    "retry_delay_seconds",
]

#: First retry delay; each further failure doubles it.
BASE_RETRY_DELAY_SECONDS = 30
#: Longest retry delay: Cloudflare Queues' 12 hours.
MAX_RETRY_DELAY_SECONDS = 43_200


def retry_delay_seconds(attempts: int, retry_after_ms: object = None) -> int:
    """Seconds before retrying a task whose ``attempts``-th delivery failed.

    30 seconds, doubling with each attempt, or the longer wait
    ``retry_after_ms`` asks for (rounded up to whole seconds); never more
    than :data:`MAX_RETRY_DELAY_SECONDS`. A ``retry_after_ms`` that is not a
    finite number from 0 (``None``, NaN, negative, a bool, another type)
    counts as none.
    """
    if isinstance(attempts, bool) or not isinstance(attempts, int):
        raise TypeError(f"attempts must be an int, got {type(attempts).__name__}")
    if attempts < 1:
        raise ValueError(f"attempts must be 1 or more, got {attempts}")
    # From the 12th attempt the backoff is past the cap; stop doubling there
    # so a huge count costs nothing.
    backoff = BASE_RETRY_DELAY_SECONDS << min(attempts - 1, 11)  # 30 * 2**(attempts - 1)
    return min(max(backoff, _requested_seconds(retry_after_ms)), MAX_RETRY_DELAY_SECONDS)


def _requested_seconds(retry_after_ms: object) -> int:
    ms = retry_after_ms
    if isinstance(ms, bool) or not isinstance(ms, int | float):
        return 0
    if isinstance(ms, float) and not math.isfinite(ms):
        return 0
    if ms < 0:
        return 0
    if ms >= MAX_RETRY_DELAY_SECONDS * 1000:
        return MAX_RETRY_DELAY_SECONDS  # also keeps a huge int from overflowing a float
    return math.ceil(ms / 1000)


def requested_wait_ms(
    retry_after_ms: Callable[[BaseException], object] | None, error: BaseException
) -> object:
    """What ``retry_after_ms(error)`` asks for, or ``None`` when there is no
    such function or it raises: a failing lookup must not stop the retry."""
    if retry_after_ms is None:
        return None
    try:
        return retry_after_ms(error)
    except Exception:
        return None
