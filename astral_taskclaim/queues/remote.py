"""What the remote backends (Cloudflare, SQS) share: their base class
:class:`RemoteQueue`, checking their ``OPTIONS``, batching bodies, and
keeping secrets out of sight.

A backend declares its options as a mapping of name to :class:`Option`;
:func:`parse_options` returns the values with defaults filled in and a list
of :class:`OptionProblem` (missing, invalid, unknown). The backend's
``check()`` turns the problems into system-check errors with its own ids,
and its run-time code raises :class:`~django.core.exceptions.ImproperlyConfigured`
with the same text, so both say exactly the same thing.
"""

from __future__ import annotations

import math
import re
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, NamedTuple

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from ..conf import app_settings
from ..redaction import REDACTED, redact
from . import arguments, outbox
from .base import BaseQueue, ClaimStatement

REQUIRED: Any = object()
"""Default of an option that must be given."""


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


#: What a credential may contain: visible ASCII, which any HTTP header carries.
HEADER_SAFE = re.compile(r"[\x21-\x7e]+")


@dataclass(frozen=True)
class Option:
    """One option: a validator returning the clean value (or raising
    ``ValueError`` saying what is expected), a default, and whether its
    value must never be echoed in messages."""

    validate: Callable[[Any], Any]
    default: Any = REQUIRED
    secret: bool = False


class OptionProblem(NamedTuple):
    """What is wrong with one option, and how to say it."""

    kind: Literal["missing", "invalid", "unknown", "outbox"]
    message: str


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
    if not HEADER_SAFE.fullmatch(raw):
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


def number(low: float, high: float, *, low_open: bool = False) -> Callable[[Any], float]:
    """A finite int or float in ``[low, high]`` (``(low, high]`` if ``low_open``)."""
    interval = f"{'(' if low_open else '['}{low:g}, {high:g}]"

    def validate(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"must be a number in {interval}")
        if not math.isfinite(value) or value > high or value < low or (low_open and value == low):
            raise ValueError(f"must be a number in {interval}")
        return float(value)

    return validate


def integer(low: int, high: int) -> Callable[[Any], int]:
    """An int (not a bool) in ``[low, high]``."""

    def validate(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"must be an integer in [{low}, {high}]")
        return value

    return validate


def flag(value: Any) -> bool:
    """``True`` or ``False``."""
    if isinstance(value, bool):
        return value
    raise ValueError("must be True or False")


def optional(validate: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``validate``, letting ``None`` through (an option left to a default chain)."""

    def check(value: Any) -> Any:
        return None if value is None else validate(value)

    return check


def parse_options(
    owner: str, options: Mapping[str, Any], spec: Mapping[str, Option]
) -> tuple[dict[str, Any], list[OptionProblem]]:
    """The clean values of ``options`` per ``spec``, and what is wrong.

    ``owner`` names the setting in messages, e.g.
    ``TASKCLAIM_QUEUES['jobs']['OPTIONS']``. Secret values are never echoed.
    """
    values: dict[str, Any] = {}
    problems: list[OptionProblem] = []
    for name, option in spec.items():
        if name not in options or (options[name] is None and option.default is REQUIRED):
            if option.default is REQUIRED:
                problems.append(OptionProblem("missing", f"{owner}[{name!r}] is required"))
            values[name] = None if option.default is REQUIRED else option.default
            continue
        value = options[name]
        try:
            values[name] = option.validate(value)
        except ValueError as error:
            kind = "str" if isinstance(value, Secret) else type(value).__name__
            shown = f"a {kind}" if option.secret else repr(value)
            problems.append(OptionProblem("invalid", f"{owner}[{name!r}] {error}, got {shown}"))
            values[name] = None
    for name in options:
        if name not in spec:
            known = ", ".join(sorted(spec))
            problems.append(
                OptionProblem("unknown", f"{owner} has unknown option {name!r}; known: {known}")
            )
    return values, problems


#: System check id of each kind of option problem (the same on every backend).
CHECK_IDS = {"missing": "E012", "invalid": "E013", "unknown": "E014", "outbox": "E015"}


def check_messages(problems: list[OptionProblem]) -> list[checks.CheckMessage]:
    """``problems`` as system-check errors: E012 missing, E013 invalid,
    E014 unknown option, E015 an outbox the claims database cannot hold."""
    return [
        checks.Error(problem.message, id=f"astral_taskclaim.{CHECK_IDS[problem.kind]}")
        for problem in problems
    ]


def raise_problems(problems: list[OptionProblem]) -> None:
    """``ImproperlyConfigured`` listing ``problems``, if there are any."""
    if problems:
        raise ImproperlyConfigured("; ".join(problem.message for problem in problems))


# What the remote backends send and how they split it.


def batch_bodies(owner: str, bodies: Any, limit: int) -> None:
    """``bodies`` of ``send_many``: a sequence of at most ``limit`` items."""
    if isinstance(bodies, str | bytes) or not hasattr(bodies, "__len__"):
        raise TypeError(f"{owner}: send_many needs a sequence of bodies, got {bodies!r:.80}")
    if len(bodies) > limit:
        raise ValueError(f"{owner}: {len(bodies)} bodies, over the batch limit of {limit}")


def chunks(
    items: Sequence[bytes], count: int, size: int, *, overhead: int = 0
) -> Iterator[list[bytes]]:
    """``items`` in order, in runs of at most ``count`` items and ``size``
    bytes, each item counting ``overhead`` bytes more than its length (the
    service's metadata per message); an item bigger than ``size`` goes
    alone."""
    chunk: list[bytes] = []
    total = 0
    for item in items:
        weight = len(item) + overhead
        if chunk and (len(chunk) == count or total + weight > size):
            yield chunk
            chunk, total = [], 0
        chunk.append(item)
        total += weight
    if chunk:
        yield chunk


class RemoteQueue(BaseQueue):
    """Base of the backends on a remote service: ``OPTIONS`` checked against
    the class's :attr:`option_spec` (credentials kept as :class:`Secret`),
    the same problems reported by :meth:`check` and raised on use, and a
    client opened on first use that :meth:`close` closes.

    With ``outbox`` on, ``send``/``send_many`` write rows to the outbox
    (:mod:`.outbox`) in the claims database instead of calling the service,
    the queue is ``transactional``, and the relay sends the rows with
    :meth:`deliver`.
    """

    #: The backend's options, name to :class:`Option`.
    option_spec: ClassVar[Mapping[str, Option]] = {}

    def __init__(self, alias: str, *, options: dict[str, Any] | None = None) -> None:
        super().__init__(alias, options=options)
        for name, option in self.option_spec.items():
            if option.secret and isinstance(self.options.get(name), str):
                # Keep the raw credential out of ``self.options``, where it could be dumped.
                self.options[name] = Secret(self.options[name])
        self._client: Any = None
        #: Whether sends go to the outbox, in the claims database.
        self.outbox = self.options.get("outbox") is True
        if self.outbox:
            self.transactional = True
            self.database = app_settings.DATABASE

    def claim_statement(self, alias: str) -> ClaimStatement | None:
        """With an outbox in database ``alias``, the statements writing
        claims and outbox rows together; else ``None``."""
        if not self.outbox or alias != self.database:
            return None
        return outbox.claim_statement(self.alias)

    def send(self, body: Any, *, delay_seconds: float = 0) -> None:
        """Sends ``body`` after ``delay_seconds``; with an outbox, writes it
        to the outbox in the caller's transaction (the relay sends it, so
        it cannot be delayed: ``delay_seconds`` must be 0)."""
        if not self.outbox:
            self.deliver_one(body, delay_seconds=delay_seconds)
            return
        if arguments.delay_seconds(delay_seconds, self.max_delay_seconds):
            raise ValueError(
                f"queue {self.alias!r}: the outbox's relay sends at once; delay_seconds must "
                f"be 0, got {delay_seconds}"
            )
        self.send_many([body])

    def send_many(self, bodies: Sequence[Any]) -> None:
        """Sends at most :attr:`max_batch_size` ``bodies``, every one
        checked first, with :meth:`deliver`; with an outbox, writes them to
        the outbox in the caller's transaction, all or none."""
        batch_bodies(f"queue {self.alias!r}", bodies, self.max_batch_size)
        encoded = [self.encode(body) for body in bodies]
        if self.outbox:
            self._config()
            outbox.insert(self.database, self.alias, encoded)
        else:
            self.deliver(encoded)

    @abstractmethod
    def deliver_one(self, body: Any, *, delay_seconds: float = 0) -> None:
        """Sends one ``body`` to the service now, after ``delay_seconds``."""

    @abstractmethod
    def deliver(self, encoded: Sequence[bytes]) -> None:
        """Sends bodies :meth:`encode` produced to the service now, in as
        few requests as its limits allow, in order. When a request fails
        after others went through, :class:`~.base.PartlySentError` names
        the bodies not sent; any other error means none was."""

    @property
    def owner(self) -> str:
        """How messages name this queue's options."""
        return f"TASKCLAIM_QUEUES[{self.alias!r}]['OPTIONS']"

    def _problems(self) -> tuple[dict[str, Any], list[OptionProblem]]:
        """The options' clean values and what is wrong with them; a backend
        extends it with rules across options."""
        config, problems = parse_options(self.owner, self.options, self.option_spec)
        problem = outbox.database_problem() if self.outbox else None
        if problem:
            problems.append(OptionProblem("outbox", f"{self.owner}['outbox'] {problem}"))
        return config, problems

    def _config(self) -> dict[str, Any]:
        """The clean options; ``ImproperlyConfigured`` listing any problem."""
        config, problems = self._problems()
        raise_problems(problems)
        return config

    def credentials(self) -> list[str]:
        """The values of this queue's secret options, for redaction only."""
        return [
            value.reveal()
            for name, option in self.option_spec.items()
            if option.secret and isinstance(value := self.options.get(name), Secret)
        ]

    def redact(self, text: str) -> str:
        """``text`` with every representation of this queue's credentials
        redacted: apply it to whatever reaches a log record or an error."""
        return redact(text, self.credentials())

    def check(self) -> list[checks.CheckMessage]:
        """E012-E014 for missing, invalid and unknown options."""
        _, problems = self._problems()
        return check_messages(problems)

    def close(self) -> None:
        """Closes the client's connections; the next call opens new ones."""
        if self._client is not None:
            self._client.close()
            self._client = None
