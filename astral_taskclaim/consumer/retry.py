"""The retry schedule of failed claimed tasks, as the TypeScript package has it.

A failed task is retried after 30 seconds, doubling with each attempt, or
after the longer wait the failure asks for (a ``Retry-After``), and never
later than 12 hours (Cloudflare Queues' longest retry delay). A task asks
for its wait by raising :class:`RetryAfter` (applications import it from
:mod:`astral_taskclaim.tasks`) or through its ``retry_after_ms`` function.
"""

from __future__ import annotations

import math
from collections.abc import Callable

#: First retry delay; each further failure doubles it.
_BASE_RETRY_DELAY_SECONDS = 30
#: Longest retry delay: Cloudflare Queues' 12 hours.
_MAX_RETRY_DELAY_SECONDS = 43_200

#: A task's ``retry_after_ms``: the wait in milliseconds a failure asks for, or ``None``.
RetryAfterMs = Callable[[BaseException], object]


class RetryAfter(Exception):
    """Raised by a task to fail this attempt and ask for a retry no sooner
    than ``retry_after_ms`` milliseconds (e.g. an HTTP ``Retry-After``).

    The wait replaces the backoff when it is longer; like the backoff it is
    capped at 12 hours and, when the attempts are used up, the task gives up
    anyway. Every claimed task honours it.
    """

    def __init__(self, retry_after_ms: float, message: str = "") -> None:
        if isinstance(retry_after_ms, bool) or not isinstance(retry_after_ms, int | float):
            raise TypeError(f"retry_after_ms must be a number, got {retry_after_ms!r}")
        try:
            finite = math.isfinite(retry_after_ms)
        except OverflowError:  # an int past a double's range is no wait a queue can keep
            finite = False
        if not (finite and retry_after_ms >= 0):
            raise ValueError(f"retry_after_ms must be a finite number from 0, got {retry_after_ms}")
        super().__init__(message or f"retry after {retry_after_ms} ms")
        self.retry_after_ms = retry_after_ms


def requested_retry_after_ms(exception: BaseException) -> float | None:
    """The wait a :class:`RetryAfter` asks for; ``None`` for other errors."""
    return exception.retry_after_ms if isinstance(exception, RetryAfter) else None


def retry_delay_seconds(attempts: int, retry_after_ms: object = None) -> int:
    """Seconds before retrying a task whose ``attempts``-th delivery failed.

    30 seconds, doubling with each attempt, or the longer wait
    ``retry_after_ms`` asks for (rounded up to whole seconds); never more
    than 12 hours (43 200 seconds). A ``retry_after_ms`` that is not a
    finite number from 0 (``None``, NaN, negative, a bool, another type)
    counts as none.
    """
    if isinstance(attempts, bool) or not isinstance(attempts, int):
        raise TypeError(f"attempts must be an int, got {type(attempts).__name__}")
    if attempts < 1:
        raise ValueError(f"attempts must be 1 or more, got {attempts}")
    # From the 12th attempt the backoff is past the cap; stop doubling there
    # so a huge count costs nothing.
    backoff = _BASE_RETRY_DELAY_SECONDS << min(attempts - 1, 11)  # 30 * 2**(attempts - 1)
    return min(max(backoff, _requested_seconds(retry_after_ms)), _MAX_RETRY_DELAY_SECONDS)


def _requested_seconds(retry_after_ms: object) -> int:
    ms = retry_after_ms
    if isinstance(ms, bool) or not isinstance(ms, int | float):
        return 0
    if isinstance(ms, float) and not math.isfinite(ms):
        return 0
    if ms < 0:
        return 0
    if ms >= _MAX_RETRY_DELAY_SECONDS * 1000:
        return _MAX_RETRY_DELAY_SECONDS  # also keeps a huge int from overflowing a float
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


def scaled_delay(seconds: float, scale: float) -> float:
    """``seconds`` times ``TASKCLAIM_DELAY_SCALE`` (``scale``), to the
    millisecond; scale 1 (the default) keeps the TypeScript package's whole
    seconds exactly."""
    return seconds if scale == 1.0 else round(seconds * scale, 3)
