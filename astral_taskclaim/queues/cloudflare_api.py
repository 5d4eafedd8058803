"""Cloudflare's REST answers, as the Cloudflare backend reads them: the
error it raises, what ``Retry-After`` asks, Cloudflare's error codes and
the ``429`` codes that waiting does not clear."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from astral_taskclaim.queues.base import QueueError
from astral_taskclaim.queues.remote import RequestRefusedError

_Redact = Callable[[str], str]

#: ``429`` codes that waiting does not clear: the account's storage limit,
#: a disabled queue, the free plan's daily limit.
_PERMANENT_429 = {
    10251: "the queue's storage limit is reached: consume or purge its backlog",
    10252: "the queue is disabled: enable it in the Cloudflare dashboard",
    10253: "the account's free-tier limit is reached: wait for the daily reset or upgrade",
}


class CloudflareError(QueueError):
    """Cloudflare refused a call: ``status`` (``None`` for a network error),
    ``errors``, Cloudflare's ``(code, message)`` pairs, and ``retry_after``,
    the wait its last answer asked for."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None,
        errors: list[tuple[int | None, str]],
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.errors = errors
        self.retry_after = retry_after


class CloudflareRefusedError(CloudflareError, RequestRefusedError):
    """Cloudflare refused a send for what its messages hold (``400``,
    ``413``): sent again, they would be refused again."""


#: The statuses of a send refused for what it holds.
_REFUSED_STATUSES = (400, 413)


def retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (a number or an HTTP date)."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(seconds, 0.0) if math.isfinite(seconds) else None
    try:
        return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None


def _error_pairs(response: httpx.Response) -> list[tuple[int | None, str]]:
    """Cloudflare's ``(code, message)`` pairs in an answer (none if it has none)."""
    try:
        errors = response.json().get("errors") or []
        return [(error.get("code"), str(error.get("message", ""))) for error in errors]
    except (ValueError, AttributeError):
        return []


def describe(response: httpx.Response) -> str:
    """An answer as ``HTTP <status>: <code> <message>; ...``."""
    errors = _error_pairs(response)
    detail = "; ".join(f"{code} {message}" for code, message in errors) or response.reason_phrase
    return f"HTTP {response.status_code}: {detail}"


def permanent(response: httpx.Response) -> str:
    """What a ``429`` that waiting cannot clear means ("" for one it can)."""
    codes = [code for code, _ in _error_pairs(response)]
    return "; ".join(_PERMANENT_429[code] for code in codes if code in _PERMANENT_429)


def error(
    response: httpx.Response, where: str, redact: _Redact, *, send: bool = False
) -> CloudflareError:
    """The :class:`CloudflareError` of a refused call, its text redacted; a
    :class:`CloudflareRefusedError` for a ``send`` refused for its content."""
    message = redact(f"{where}: {describe(response)}")
    pairs = [(code, redact(text)) for code, text in _error_pairs(response)]
    refused = send and response.status_code in _REFUSED_STATUSES
    kind = CloudflareRefusedError if refused else CloudflareError
    return kind(message, status=response.status_code, errors=pairs)


def result(response: httpx.Response, where: str, redact: _Redact) -> Any:
    """The ``result`` of a successful answer; :class:`CloudflareError` if the
    answer is not JSON or says ``"success": false``."""
    try:
        payload = response.json()
    except ValueError:
        raise CloudflareError(
            f"{where}: HTTP {response.status_code} with a body that is not JSON",
            status=response.status_code,
            errors=[],
        ) from None
    if not isinstance(payload, dict) or payload.get("success") is False:
        raise error(response, where, redact)
    return payload.get("result")
