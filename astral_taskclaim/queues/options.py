"""The one validation of queue backends' ``OPTIONS`` and methods' arguments.

A backend declares its options as :attr:`~.base.BaseQueue.option_spec`, a
mapping of name to :class:`Option` (a parser that returns the clean value or
raises ``ValueError`` saying what is expected, a default, whether the value
is a credential, the check id of a bad value). :func:`parse_options` checks
``OPTIONS`` against it once, when the queue is created, and returns the clean
values and every :class:`Problem`; the queue reports the problems as system
checks and refuses to be used while one is an error. Each check id has one
template, :meth:`Problem.message`::

    TASKCLAIM_QUEUES['jobs']['OPTIONS']['timeout'] must be a number in (0, 600], got 0

=====  =========================================================
E011   ``database`` is not a PostgreSQL entry of ``DATABASES``.
E012   A required option is missing.
E013   An option has a wrong type or value (or two disagree).
E014   An unknown option (a typo, usually).
E015   ``outbox`` cannot work: not a remote queue, or no PostgreSQL
       claims database.
W018   ``database`` is not ``TASKCLAIM_DATABASE``.
=====  =========================================================

The methods' arguments (``delay_seconds``, ``max_messages``,
``wait_seconds``, a lease's ``seconds``) are checked before any I/O by
:mod:`~astral_taskclaim.core.validation`: a ``TypeError`` for the wrong type
(``bool`` counts as one, though it is an ``int``), a ``ValueError`` for a
value out of range, each naming the argument and the range it must be in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.core import checks

from astral_taskclaim.core.redaction import REDACTED, redact
from astral_taskclaim.core.validation import number_range, validate_count, validate_number

__all__ = [
    "Option",
    "Problem",
    "Secret",
    "delay_seconds",
    "flag",
    "http_url",
    "integer",
    "lease_seconds",
    "max_messages",
    "number",
    "optional",
    "queue_name",
    "seconds_option",
    "secret",
    "text",
    "wait_seconds",
]

_REQUIRED: Any = object()
"""Default of an option that must be given."""

#: What a credential may contain: visible ASCII, which any HTTP header carries.
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")

#: The option ``outbox``, which only the remote queues know.
_OUTBOX_ONLY_REMOTE = "is an option of the remote queues (Cloudflare, SQS) only"


class Secret:
    """A credential whose ``repr``/``str`` never show it; :meth:`reveal` does."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The credential itself, for the one call that needs it."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret({REDACTED!r})"

    __str__ = __repr__

    def redact(self, text: str) -> str:
        """``text`` with every representation of the credential (as is,
        ``repr``-escaped, JSON-escaped, percent-encoded) replaced."""
        return redact(text, [self._value])


@dataclass(frozen=True)
class Option:
    """One option: ``parse`` returns the clean value or raises
    ``ValueError`` saying what is expected (``"must be ..."``); ``default``
    (none when the option must be given) or ``default_factory`` (called
    with the queue's alias); ``secret``: a credential, kept as a
    :class:`Secret` and never echoed; ``check_id`` of a bad value."""

    parse: Callable[[Any], Any]
    default: Any = _REQUIRED
    secret: bool = False
    check_id: str = "E013"
    default_factory: Callable[[str], Any] | None = None

    def default_for(self, alias: str) -> Any:
        """The default of this option on queue ``alias`` (``None`` if required)."""
        if self.default_factory is not None:
            return self.default_factory(alias)
        return None if self.default is _REQUIRED else self.default


@dataclass(frozen=True)
class Problem:
    """What is wrong with a queue's options: ``check_id`` (``"E013"``),
    the option ``name`` (``None`` for the options as a whole), what is
    wrong, the value as it may be shown (never a secret's) and a hint."""

    check_id: str
    problem: str
    name: str | None = None
    shown: str | None = None
    hint: str | None = None

    def message(self, owner: str) -> checks.CheckMessage:
        """The system-check message about the options ``owner`` names
        (``TASKCLAIM_QUEUES['jobs']['OPTIONS']``): an error, a warning for a
        ``W`` id."""
        where = owner if self.name is None else f"{owner}[{self.name!r}]"
        got = "" if self.shown is None else f", got {self.shown}"
        level = checks.Warning if self.check_id.startswith("W") else checks.Error
        return level(
            f"{where} {self.problem}{got}", hint=self.hint, id=f"astral_taskclaim.{self.check_id}"
        )


def parse_options(
    alias: str, options: Mapping[str, Any], spec: Mapping[str, Option]
) -> tuple[dict[str, Any], list[Problem]]:
    """The clean values of ``options`` per ``spec`` (a bad one replaced by
    its default, ``None`` if required), and every problem: E012 missing,
    the option's ``check_id`` (E013) invalid, E014 unknown, E015 ``outbox``
    on a queue without it. Secret values are never shown."""
    values: dict[str, Any] = {}
    problems: list[Problem] = []
    for name, option in spec.items():
        value = options.get(name)
        required = option.default is _REQUIRED and option.default_factory is None
        if name not in options or (value is None and required):
            if required:
                problems.append(Problem("E012", "is required", name))
            values[name] = option.default_for(alias)
            continue
        try:
            values[name] = option.parse(value)
        except ValueError as error:
            kind = "str" if isinstance(value, Secret) else type(value).__name__
            shown = f"a {kind}" if option.secret else repr(value)
            problems.append(Problem(option.check_id, str(error), name, shown))
            values[name] = option.default_for(alias)
    for name in options:
        if name in spec:
            continue
        if name == "outbox":
            hint = "This queue needs no outbox: the PostgreSQL queue writes its messages with "
            hint += "their claims, and the memory queue keeps them in the process."
            problems.append(Problem("E015", _OUTBOX_ONLY_REMOTE, name, hint=hint))
        else:
            known = f"has unknown option {name!r}; known: {', '.join(sorted(spec))}"
            problems.append(Problem("E014", known))
    return values, problems


# Option parsers


def text(value: Any) -> str:
    """A non-empty string."""
    if not isinstance(value, str) or not value:
        raise ValueError("must be a non-empty string")
    return value


def secret(value: Any) -> Secret:
    """A non-empty string of visible ASCII characters, kept as a
    :class:`Secret`.

    Credentials travel in HTTP headers, where whitespace, control
    characters and non-ASCII text cannot go. Such a value (typically a token
    read from a file with its trailing newline) is refused, never stripped:
    the error says what is wrong without showing the value."""
    raw = value.reveal() if isinstance(value, Secret) else value
    text(raw)
    if not _HEADER_SAFE.fullmatch(raw):
        raise ValueError(
            "must be visible ASCII characters only (no spaces, newlines, control or non-ASCII "
            "characters, which cannot go in an HTTP header; a secret read from a file often "
            "ends with a newline: strip it)"
        )
    return value if isinstance(value, Secret) else Secret(raw)


def http_url(value: Any) -> str:
    """An ``http://`` or ``https://`` URL, without a trailing slash."""
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ValueError("must be an http:// or https:// URL")
    return value.rstrip("/")


def number(
    low: float, high: float, *, low_open: bool = False, unit: str = ""
) -> Callable[[Any], float]:
    """A finite int or float in ``[low, high]`` (``(low, high]`` if
    ``low_open``), as a float; ``unit`` (``"seconds"``) names what it counts."""
    expected = f"must be a number{f' of {unit}' if unit else ''} "
    expected += number_range(low, high, low_open=low_open)

    def parse(value: Any) -> float:
        try:
            return validate_number(value, name="value", low=low, high=high, low_open=low_open)
        except (TypeError, ValueError):
            raise ValueError(expected) from None

    return parse


def integer(low: int, high: int) -> Callable[[Any], int]:
    """An int (not a bool) in ``[low, high]``."""

    def parse(value: Any) -> int:
        try:
            return validate_count("value", value, minimum=low, maximum=high)
        except (TypeError, ValueError):
            raise ValueError(f"must be an integer in [{low}, {high}]") from None

    return parse


def flag(value: Any) -> bool:
    """``True`` or ``False``."""
    if isinstance(value, bool):
        return value
    raise ValueError("must be True or False")


def optional(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``parse``, letting ``None`` through (an option left to a default chain)."""

    def parse_optional(value: Any) -> Any:
        return None if value is None else parse(value)

    return parse_optional


def queue_name(max_bytes: int) -> Callable[[Any], str]:
    """A non-empty ``str`` without NUL of at most ``max_bytes`` UTF-8 bytes."""

    def parse(value: Any) -> str:
        if not isinstance(value, str) or not value or "\x00" in value:
            raise ValueError("must be a non-empty str without NUL")
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > max_bytes:
            raise ValueError(f"is {size} bytes of UTF-8, over the {max_bytes}-byte limit")
        return value

    return parse


def queue_name_option(max_bytes: int) -> Option:
    """``queue_name``: a :func:`queue_name` of at most ``max_bytes``,
    by default the queue's alias."""
    return Option(queue_name(max_bytes), default_factory=lambda alias: alias)


def seconds_option(default: float, maximum: float) -> Option:
    """An option of seconds in ``(0, maximum]``, ``default`` when not given."""
    return Option(number(0, maximum, low_open=True, unit="seconds"), default=default)


# Method arguments


def delay_seconds(value: object, maximum: float) -> float:
    """A delay: a number of seconds from 0 to ``maximum``."""
    return validate_number(value, name="delay_seconds", high=maximum)


def whole_delay_seconds(value: object, maximum: int) -> int:
    """A delay as :func:`delay_seconds` checks it, rounded up to whole
    seconds for a queue that counts in seconds: a retry must never come
    early."""
    return math.ceil(delay_seconds(value, maximum))


def max_messages(value: object, limit: int) -> int:
    """The most messages one ``receive`` returns: an int from 1 to ``limit``."""
    return validate_count("max_messages", value, maximum=limit)


def wait_seconds(value: object) -> float:
    """How long one ``receive`` may wait for a message: a finite number of
    seconds from 0."""
    return validate_number(value, name="wait_seconds")


def lease_seconds(value: object, maximum: float) -> float:
    """A lease's new length: a number of seconds above 0, at most ``maximum``."""
    return validate_number(value, name="seconds", low_open=True, high=maximum)
