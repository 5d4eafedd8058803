"""The claimed-task message body: the one definition of the wire format.

A claimed task travels as the compact JSON object
``{"key": ..., "claim": ..., "windowSeconds": ..., "task": ...}``, fields in
that order, UTF-8 text kept as it is and numbers strict (no NaN or
Infinity) and written as JavaScript writes them: byte for byte what
``JSON.stringify`` gives a TypeScript producer, so producers and consumers
of either package share a queue.

Everything about that body lives here: the JSON encoding
(:data:`JSON_ENCODER`, :func:`encode_json`, from
:mod:`~astral_taskclaim.core.jsontext`), building it
(:func:`message_body`, and :func:`body_writer` for bulk sends that already
hold each task's JSON), the claim token (:data:`TOKEN_PATTERN`,
:data:`PLACEHOLDER_TOKEN`), ``windowSeconds`` on the wire
(:func:`wire_seconds`), and reading a received body back
(:func:`decode_body`, :func:`parse_body`), which applies the same key and window rules as the
claim functions.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from astral_taskclaim.core.jsontext import JSON_ENCODER, NotJSONError, encode_json
from astral_taskclaim.core.tracing import TRACE_FIELD, carrier, untraced
from astral_taskclaim.core.validation import (
    MAX_KEY_BYTES,
    MAX_SECONDS,
    validate_key,
    validate_seconds,
)

__all__ = [
    "JSON_ENCODER",
    "PLACEHOLDER_TOKEN",
    "TOKEN_PATTERN",
    "Envelope",
    "NotJSONError",
    "body_writer",
    "decode_body",
    "encode_json",
    "is_token",
    "message_body",
    "parse_body",
    "validate_token",
    "wire_seconds",
]

#: A claim token as the table stores it: a hyphenated UUID, in either case.
TOKEN_PATTERN = re.compile(
    # Explicit ranges: re.IGNORECASE would also fold some non-ASCII letters.
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)

#: Stands in for the token in a body checked before its key is claimed:
#: every token is this long, so the checked body is as big as the sent one.
PLACEHOLDER_TOKEN = "00000000-0000-0000-0000-000000000000"  # noqa: S105  (a UUID, no secret)


def is_token(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a claim token string: a hyphenated UUID, either case."""
    return isinstance(value, str) and TOKEN_PATTERN.fullmatch(value) is not None


def validate_token(token: object, *, name: str = "token") -> str:
    """``token`` as a string if it is a claim token (a UUID)."""
    if isinstance(token, uuid.UUID):
        return str(token)
    if not isinstance(token, str):
        raise TypeError(f"{name} must be a UUID string, got {type(token).__name__}")
    if not is_token(token):
        raise ValueError(f"{name} must be a hyphenated UUID, got {token!r}")
    return token


def wire_seconds(seconds: float) -> float:
    """``seconds`` as JavaScript writes it: a whole float as an int, so that
    ``300.0`` goes on the wire as ``300``, byte for byte what TypeScript sends."""
    if isinstance(seconds, float) and seconds.is_integer():
        return int(seconds)
    return seconds


def message_body(key: str, token: str, window_seconds: float, task: Any) -> dict[str, Any]:
    """The message body of a claimed task, fields in wire order; with the
    current span's :data:`~astral_taskclaim.core.tracing.TRACE_FIELD` last
    when a tracing SDK is in use (:func:`~astral_taskclaim.core.tracing.carrier`)."""
    body = {"key": key, "claim": token, "windowSeconds": wire_seconds(window_seconds), "task": task}
    trace = carrier()
    if trace is not None:
        body[TRACE_FIELD] = trace
    return body


#: The body field naming its claimed task, on a queue that carries several:
#: after the four fields, and ignored by the TypeScript consumer, which
#: reads those four only.
TASK_FIELD = "taskName"

#: The body field a worker adds when it sends a message again to wait for a
#: worker that has its task: when a worker first found the task unknown, in
#: epoch milliseconds (:mod:`~astral_taskclaim.consumer.deferral`).
WAITING_FIELD = "waitingSince"

#: The body field of a trailing-mode message sent at once (``true``): its
#: run holds the key a window from its start (:mod:`~astral_taskclaim.claims.trailing`).
TRAILING_FIELD = "trailing"
#: The body field of a follow-up run's message (``true``): its delivery
#: claims the key and runs the pending follow-up's task.
FOLLOW_UP_FIELD = "followUp"


def trailing_run(body: object) -> bool:
    """Whether ``body`` is a trailing-mode message's or a follow-up run's."""
    return type(body) is dict and body.get(FOLLOW_UP_FIELD, body.get(TRAILING_FIELD)) is True


def task_name_of(body: object) -> object:
    """The :data:`TASK_FIELD` of a received body, or ``None``."""
    return body.get(TASK_FIELD) if isinstance(body, Mapping) else None


def _fixed_text() -> tuple[str, ...]:
    """The text between the four values of an encoded body, in order: found
    by encoding :func:`message_body` with a marker in each value, so it
    cannot drift from the body the queues send."""
    markers = ("\x00key", "\x00claim", "\x00window", "\x00task")
    with untraced():
        skeleton = JSON_ENCODER.encode(message_body(*markers))  # type: ignore[arg-type]
    encoded_markers = "|".join(re.escape(JSON_ENCODER.encode(marker)) for marker in markers)
    return tuple(re.split(encoded_markers, skeleton))


_OPEN, _CLAIM, _WINDOW, _TASK, _CLOSE = _fixed_text()
# What JSON_ENCODER.encode does with a str (ensure_ascii=False), without its checks.
_encode_text: Callable[[str], str] = json.encoder.encode_basestring  # type: ignore[attr-defined]


def body_writer(window_seconds: float) -> Callable[[str, str, str], str]:
    """A function writing the encoded body of ``(key, token, task_json)``
    for ``window_seconds``: exactly ``encode_json(message_body(...))``, put
    together from a task's JSON already made (and checked) by
    :func:`encode_json`, for sends of many tasks."""
    window_text = _WINDOW + JSON_ENCODER.encode(wire_seconds(window_seconds)) + _TASK
    trace = carrier()  # the span of the call that makes the writer
    close = (
        _CLOSE
        if trace is None
        else f",{_encode_text(TRACE_FIELD)}:{JSON_ENCODER.encode(trace)}{_CLOSE}"
    )

    def write(key: str, token: str, task_json: str) -> str:
        # A token is hex digits and hyphens: nothing in it to escape.
        return f'{_OPEN}{_encode_text(key)}{_CLAIM}"{token}"{window_text}{task_json}{close}'

    return write


_raw_decode = json.JSONDecoder().raw_decode


def decode_body(text: str) -> Any:
    """A received body's text as ``json.loads`` reads it, or ``text`` itself
    when that raises: valid JSON may nest deeper than Python's decoder goes
    (PostgreSQL's CHECK accepts it), and such a body reaches the consumer
    as text, which :func:`parse_body` refuses (acked as malformed)."""
    try:
        # Text the decoder reads whole from its first character is what
        # json.loads gives, without its two whitespace scans (every body
        # this package writes is compact); any other is left to json.loads.
        value, end = _raw_decode(text)
        if end == len(text):
            return value
    except (ValueError, RecursionError):
        pass
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


@dataclass(frozen=True)
class Envelope:
    """A received claimed-task body, checked."""

    key: str
    claim: str
    window_seconds: float
    task: Any


def parse_body(body: object) -> Envelope | None:
    """``body`` as a claimed-task envelope, or ``None`` for any other shape.

    Accepted: a mapping whose ``key`` is a valid claim key (a non-empty
    ``str`` without NUL, at most 1024 UTF-8 bytes), whose ``claim`` is a
    UUID (either case) and whose ``windowSeconds`` is a number of seconds
    the claim functions accept (finite, 0 to about 3,170 years; a bool is
    not a number). A missing ``task`` is ``None``. A body whose claim could
    never have been written is no envelope: its claim is never touched.
    """
    # A decoded body is a dict: the exact-type test is cheaper than the ABC's.
    if type(body) is not dict and not isinstance(body, Mapping):
        return None
    key, claim, window = body.get("key"), body.get("claim"), body.get("windowSeconds")
    if not is_token(claim):
        return None
    # The common body (an ASCII key, a whole number of seconds) passes these
    # tests, which imply the full checks' (ASCII text is valid UTF-8 of one
    # byte a character); any other goes through the full checks.
    if not (
        type(key) is str and 0 < len(key) <= MAX_KEY_BYTES and key.isascii() and "\x00" not in key
    ):
        try:
            key = validate_key(key)
        except (TypeError, ValueError):
            return None
    if not (type(window) is int and 0 <= window <= MAX_SECONDS):
        try:
            window = validate_seconds(window, name="windowSeconds")
        except (TypeError, ValueError):
            return None
    return Envelope(key, claim, window, body.get("task"))
