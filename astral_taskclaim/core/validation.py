"""The one way to check a value given to the app: each ``validate_*``
returns the value (or its clean form) or raises ``TypeError`` (wrong type;
a ``bool`` is never a number) or ``ValueError`` (out of range), naming the
setting, option or argument and the bad value. Code that reports instead
of raising (system checks, a command's ``--file`` lines) catches these.

A key is a non-empty ``str`` without NUL of at most :data:`MAX_KEY_BYTES`
UTF-8 bytes, so it always fits the primary-key index. Windows and delays
are ``int`` or ``float`` seconds, finite, from 0 up to :data:`MAX_SECONDS`;
a window a producer gives is more than 0. (Tokens and tasks, which belong
to the message body, are checked in :mod:`~astral_taskclaim.core.envelope`.)

Before a key is claimed, :func:`check_configured` and :func:`check_encodes`
make a queue raise what its send would (a bad option, a body too big), so
that error never costs a claim, nor a held key's silence.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from django.core.exceptions import ImproperlyConfigured

from astral_taskclaim.core.conf import app_settings

#: Longest key, in UTF-8 bytes. A B-tree entry may take about a third of a
#: page (2704 bytes); 1024 leaves room for the rest of the index tuple and
#: for keys that do not compress.
MAX_KEY_BYTES = 1024

#: Longest window or delay, in seconds (about 3,170 years): far past any real
#: window, well inside what PostgreSQL's ``timestamptz`` arithmetic accepts.
MAX_SECONDS = 10**11


def validate_key(key: object, *, name: str = "key") -> str:
    """``key`` if it can be a claim key, else ``TypeError``/``ValueError``."""
    if not isinstance(key, str):
        raise TypeError(f"{name} must be a str, got {type(key).__name__}")
    if not key:
        raise ValueError(f"{name} must not be empty")
    if "\x00" in key:
        raise ValueError(f"{name} must not contain NUL characters")
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise ValueError(f"{name} is not valid Unicode text: {error.reason}") from None
    if size > MAX_KEY_BYTES:
        raise ValueError(f"{name} is {size} bytes of UTF-8, over the {MAX_KEY_BYTES}-byte limit")
    return key


#: Which trigger's task a follow-up run carries (``trailing=``): the latest's or the first's.
Trailing = Literal["latest", "first"]


@dataclass(frozen=True)
class Debounce:
    """``trailing=Debounce(seconds)``: a trigger never runs at once; the
    key's follow-up runs once no trigger came for ``seconds`` (each pushes
    it back), and no later than ``max_wait_seconds`` after the burst's first
    trigger (``None``: no bound), with the ``keep`` trigger's task; a window
    still keeps runs of the key a window apart (see :doc:`/flow-control`)."""

    seconds: float
    max_wait_seconds: float | None = None
    keep: Trailing = "latest"

    def __post_init__(self) -> None:
        # Beyond MAX_SECONDS, the delivery's deadline overflows PostgreSQL's interval.
        high = MAX_SECONDS
        validate_number(self.seconds, name="Debounce seconds", low=0, low_open=True, high=high)
        if self.max_wait_seconds is not None:
            name = "Debounce max_wait_seconds"
            validate_number(self.max_wait_seconds, name=name, low=0, high=high)
            if self.max_wait_seconds < self.seconds:
                raise ValueError(
                    f"{name} must be at least seconds ({self.seconds!r}), "
                    f"got {self.max_wait_seconds!r}"
                )
        if self.keep not in ("latest", "first"):
            raise ValueError(f'Debounce keep must be "latest" or "first", got {self.keep!r}')


#: What ``trailing=`` takes.
TrailingOption = Trailing | Debounce | bool | None


def validate_trailing(value: object, *, name: str = "trailing") -> Trailing | Debounce | None:
    """``value`` as a trailing mode: ``"latest"`` (``True`` too), ``"first"``,
    a :class:`Debounce`, or ``None`` for ``False`` and ``None`` (a trigger on
    a claimed key is dropped)."""
    if value is None or value is False:
        return None
    if value is True or value == "latest":
        return "latest"
    if value == "first" or isinstance(value, Debounce):
        return value  # type: ignore[return-value]
    raise ValueError(f'{name} must be "latest", "first", a Debounce, True or False, got {value!r}')


def validate_seconds(value: object, *, name: str) -> float:
    """``value`` if it is a finite number of seconds from 0 to :data:`MAX_SECONDS`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be an int or float, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if not 0 <= value <= MAX_SECONDS:
        raise ValueError(f"{name} must be from 0 to {MAX_SECONDS} seconds, got {value!r}")
    return value


def validate_window(value: object, *, name: str = "window_seconds") -> float:
    """``value`` if it can be a claim window: as :func:`validate_seconds`,
    but more than 0. A zero window would expire the claim as it is written,
    so every trigger would send a task: coalescing silently off."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
        raise ValueError(
            f"{name} must be more than 0 and at most {MAX_SECONDS} seconds, got {value!r}"
        )
    validate_seconds(value, name=name)
    if value == 0:
        raise ValueError(
            f"{name} must be more than 0, got {value!r}: a 0-second claim expires at once, "
            "so nothing coalesces (to run every trigger, send to the queue without a claim)"
        )
    return value  # type: ignore[return-value]


def validate_time_limit(value: object, *, name: str = "time_limit") -> float | None:
    """``value`` if it can be a run's time limit: ``None`` (no limit) or a
    finite number of seconds above 0, at most :data:`MAX_SECONDS`; else
    ``TypeError``/``ValueError`` naming ``name``. A limit of 0 would fail
    every run before it starts."""
    if value is None:
        return None
    expected = f"a number of seconds above 0 and at most {MAX_SECONDS:g}"
    return validate_number(
        value, name=name, low=0, low_open=True, high=MAX_SECONDS, expected=expected
    )


def check_configured(queue: object) -> None:
    """``ImproperlyConfigured`` naming ``queue`` if its
    ``configuration_errors()`` (else ``check()``) reports a serious
    problem: raised before a claim, not by the send after it."""
    errors_of = getattr(queue, "configuration_errors", None)
    if callable(errors_of):
        errors = list(errors_of())
    else:
        check = getattr(queue, "check", None)
        errors = [m for m in check() if m.is_serious()] if callable(check) else []
    name = getattr(queue, "name", None) or type(queue).__name__
    raise_misconfigured(f"queue {name!r}", errors)


def raise_misconfigured(subject: str, errors: Iterable[Any]) -> None:
    """``ImproperlyConfigured`` naming ``subject`` (``"queue 'q'"``) and
    listing the system-check ``errors`` found in its configuration, if any:
    the one way the app's check errors become an exception."""
    found = list(errors)
    if found:
        problems = "; ".join(str(message.msg) for message in found)
        raise ImproperlyConfigured(f"{subject} is misconfigured: {problems}")


def max_retries_problem(value: object, *, name: str = "max_retries") -> str | None:
    """Why ``value`` cannot be a retry count (an ``int`` from 0), or ``None``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return f"{name} must be an int from 0, got {value!r}"
    return None


def validate_max_retries(value: object, *, name: str = "max_retries") -> int:
    """``value`` if it is a retry count (an ``int`` from 0), else ``ValueError``."""
    problem = max_retries_problem(value, name=name)
    if problem is not None:
        raise ValueError(problem)
    assert isinstance(value, int)
    return value


def check_encodes(queue: object, bodies: Iterable[Any]) -> None:
    """Encodes each of ``bodies`` with ``queue.encode`` (if the queue has
    one), so a body it rejects raises its error before a claim is written."""
    encode = getattr(queue, "encode", None)
    if callable(encode):
        for body in bodies:
            encode(body)


def validate_count(
    name: str, value: object, *, maximum: int | None = None, minimum: int = 1
) -> int:
    """``value``, an int from ``minimum`` (to ``maximum``); else an error naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" to {maximum}" if maximum is not None else " or more"
        raise ValueError(f"{name} must be from {minimum}{upper}, got {value}")
    return value


def number_range(low: float, high: float = math.inf, *, low_open: bool = False) -> str:
    """How a range of numbers reads in an error: ``"in [0, 600]"``,
    ``"in (0, 600]"``; without ``high``, ``"a finite number from 0"`` (or
    ``"above 0"``)."""
    if math.isinf(high):
        return f"a finite number {'above' if low_open else 'from'} {low:g}"
    return f"in {'(' if low_open else '['}{low:g}, {high:g}]"


def validate_number(
    value: object,
    *,
    name: str,
    low: float = 0,
    high: float = math.inf,
    low_open: bool = False,
    expected: str | None = None,
) -> float:
    """``value`` as a float if it is a finite ``int`` or ``float`` from
    ``low`` (above it if ``low_open``) to ``high``; else ``TypeError`` or
    ``ValueError`` naming ``name``, saying what is ``expected`` (by default
    the :func:`number_range`)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if not (math.isfinite(value) and low <= value <= high) or (low_open and value == low):
        expected = expected or number_range(low, high, low_open=low_open)
        raise ValueError(f"{name} must be {expected}, got {value!r}")
    return float(value)


def validate_alias(value: object, *, name: str) -> str:
    """``value`` if it is a ``TASKCLAIM_QUEUES`` alias, else ``ValueError``
    naming ``name`` and listing the aliases."""
    if isinstance(value, str) and value in app_settings.QUEUES:
        return value
    known = ", ".join(sorted(app_settings.QUEUES)) or "none"
    raise ValueError(f"{name} must name a TASKCLAIM_QUEUES alias ({known}), got {value!r}")


def validate_callable(value: object, *, name: str, required: bool = True) -> object:
    """``value`` if it is callable (or ``None``, an optional hook left out,
    unless ``required``), else ``TypeError`` naming ``name``."""
    if not callable(value) and (required or value is not None):
        raise TypeError(f"{name} must be callable, got {type(value).__name__}")
    return value


#: The most runs of one group a concurrency limit may allow at once.
MAX_CONCURRENCY_LIMIT = 1000


def validate_concurrency_limit(limit: object, group: object) -> int | None:
    """``limit`` if it can be a concurrency limit: an ``int`` from 1 to
    :data:`MAX_CONCURRENCY_LIMIT`, or ``None`` (no limit, and then no
    ``group``); ``group`` must be callable or ``None``."""
    if limit is None:
        if group is not None:
            raise ValueError(
                "concurrency_group needs concurrency_limit (how many runs of a group at once)"
            )
        return None
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"concurrency_limit must be an int, got {type(limit).__name__}")
    if not 1 <= limit <= MAX_CONCURRENCY_LIMIT:
        raise ValueError(
            f"concurrency_limit must be from 1 to {MAX_CONCURRENCY_LIMIT}, got {limit!r}"
        )
    validate_callable(group, name="concurrency_group", required=False)
    return limit


def validate_text(value: object, *, name: str) -> str:
    """``value`` if it is a non-empty ``str``, else ``ValueError`` naming ``name``."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty str, got {value!r}")
    return value
