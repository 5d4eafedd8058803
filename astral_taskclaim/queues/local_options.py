"""Validation of the PostgreSQL and in-memory queues' ``OPTIONS`` (their
methods' arguments are checked by :mod:`.arguments`, as every backend's).

A backend validates its options once, when it is created, without raising:
:meth:`~astral_taskclaim.queues.BaseQueue.check` reports the problems as
system-check errors, and using a misconfigured queue raises
``ImproperlyConfigured`` with the first one.

Ids, shared with the other backends where they mean the same:

=====  =========================================================
E011   ``database`` is not a PostgreSQL entry of ``DATABASES``.
E013   An option has a wrong type or value.
E014   An unknown option (a typo, usually).
E015   ``outbox``, an option of the remote queues only.
W018   ``database`` is not ``TASKCLAIM_DATABASE``.
=====  =========================================================
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

ID = "astral_taskclaim.{}"


@dataclass
class OptionProblems:
    """Problems found in one queue's ``OPTIONS``, as check messages."""

    alias: str
    messages: list[checks.CheckMessage] = field(default_factory=list)

    def error(self, code: str, message: str, hint: str | None = None) -> None:
        """Records error ``code`` (``"E013"``) about this queue."""
        text = f"TASKCLAIM_QUEUES[{self.alias!r}]: {message}"
        self.messages.append(checks.Error(text, hint=hint, id=ID.format(code)))

    def warning(self, code: str, message: str, hint: str | None = None) -> None:
        """Records warning ``code`` (``"W018"``) about this queue."""
        text = f"TASKCLAIM_QUEUES[{self.alias!r}]: {message}"
        self.messages.append(checks.Warning(text, hint=hint, id=ID.format(code)))

    def raise_first(self) -> None:
        """Raises ``ImproperlyConfigured`` with the first error, if any."""
        for message in self.messages:
            if message.is_serious():
                raise ImproperlyConfigured(message.msg)

    def unknown(self, options: Mapping[str, Any], known: Iterable[str]) -> None:
        """E014 for every option name not in ``known`` (a typo, usually);
        E015 for ``outbox``, which only the remote queues have."""
        allowed = sorted(known)
        for name in sorted(set(options) - set(allowed)):
            if name == "outbox":
                self.error(
                    "E015",
                    "outbox is an option of the remote queues (Cloudflare, SQS) only",
                    hint="This queue needs no outbox: the PostgreSQL queue writes its messages "
                    "with their claims, and the memory queue keeps them in the process.",
                )
                continue
            self.error(
                "E014",
                f"unknown option {name!r}",
                hint=f"Known options: {', '.join(allowed)}.",
            )

    def seconds(
        self,
        options: Mapping[str, Any],
        name: str,
        default: float,
        *,
        maximum: float,
    ) -> float:
        """Option ``name`` as seconds in ``(0, maximum]``; E013 and the
        default when it is something else."""
        value = options.get(name, default)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 < value <= maximum
        ):
            self.error(
                "E013", f"{name} must be a number of seconds in (0, {maximum}], got {value!r}"
            )
            return default
        return float(value)

    def flag(self, options: Mapping[str, Any], name: str, default: bool) -> bool:
        """Option ``name`` as a bool; E013 and the default for another type."""
        value = options.get(name, default)
        if not isinstance(value, bool):
            self.error("E013", f"{name} must be True or False, got {value!r}")
            return default
        return value

    def queue_name(self, options: Mapping[str, Any], *, max_bytes: int) -> str:
        """Option ``queue_name`` (default: the alias), which must be a
        non-empty ``str`` without NUL of at most ``max_bytes`` UTF-8 bytes
        (E013 otherwise)."""
        value = options.get("queue_name", self.alias)
        if not isinstance(value, str) or not value or "\x00" in value:
            self.error("E013", f"queue_name must be a non-empty str without NUL, got {value!r}")
            return self.alias
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > max_bytes:
            self.error(
                "E013",
                f"queue_name {value!r} is {size} bytes of UTF-8, over the {max_bytes}-byte limit",
                hint="Set OPTIONS['queue_name'] to a shorter name.",
            )
        return value
