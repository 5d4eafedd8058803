"""What Cloudflare's REST API accepts: requests checked against the
official SDK's types, and the service's limits.

The ``cloudflare`` package (a test dependency only) ships the REST API's
request parameters as TypedDicts generated from Cloudflare's OpenAPI
schema. pydantic's ``TypeAdapter`` (the SDK's own validation library)
validates a request body against them in strict mode, so a field of the
wrong type is refused rather than coerced. A TypedDict lets unknown keys
through and validates ``Iterable`` fields lazily, so the validated value is
materialised and compared with the request: anything the SDK's schema does
not know makes them differ.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from cloudflare.types.queues.message_ack_params import MessageAckParams
from cloudflare.types.queues.message_bulk_push_params import MessageBulkPushParams
from cloudflare.types.queues.message_pull_params import MessagePullParams
from cloudflare.types.queues.message_push_params import MessagePushParams
from pydantic import TypeAdapter, ValidationError

#: The SDK's parameter type of each ``.../messages{action}`` route.
ADAPTERS: dict[str, TypeAdapter[Any]] = {
    "": TypeAdapter(MessagePushParams),
    "/batch": TypeAdapter(MessageBulkPushParams),
    "/pull": TypeAdapter(MessagePullParams),
    "/ack": TypeAdapter(MessageAckParams),
}


class SchemaMismatch(ValueError):
    """A request body that Cloudflare's API schema does not describe."""


def check_request(action: str, account_id: str, request: dict[str, Any]) -> None:
    """Raises :class:`SchemaMismatch` unless ``request`` (the JSON body of a
    ``.../messages{action}`` call) matches the SDK's parameter type."""
    params = {"account_id": account_id, **request}
    try:
        validated = _materialised(ADAPTERS[action].validate_python(params, strict=True))
    except ValidationError as error:
        raise SchemaMismatch(f"messages{action}: {error}") from None
    if validated != params:
        raise SchemaMismatch(f"messages{action}: fields the API does not know in {request!r:.300}")


def _materialised(value: Any) -> Any:
    """``value`` with pydantic's lazy iterators consumed (validating them)."""
    if isinstance(value, dict):
        return {key: _materialised(item) for key, item in value.items()}
    if isinstance(value, list | tuple | Iterator):
        return [_materialised(item) for item in value]
    return value


# The service's limits and errors, as the local server applies them.

MAX_MESSAGE_BYTES = 128_000
METADATA_BYTES = 100
MAX_BATCH_BYTES = 256_000
MAX_BATCH_COUNT = 100
MAX_DELAY_SECONDS = 43_200
MAX_VISIBILITY_MS = 43_200_000

ERRORS = {
    971: "Please wait and consider throttling your request speed",
    10250: "Queue is overloaded",
    10251: "Queue storage limit exceeded",
    10252: "Queue is disabled",
    10253: "Free tier limit exceeded",
}


class ApiError(Exception):
    """An error answer: HTTP status, Cloudflare code and message."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def delay_of(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ApiError(400, 10203, "Invalid message metadata: delay_seconds")
    if not 0 <= value <= MAX_DELAY_SECONDS:
        raise ApiError(400, 10203, "Invalid message metadata: delay_seconds")
    return int(value)


def prepare(entry: Any, batch_delay: int) -> tuple[str, str, int]:
    if not isinstance(entry, dict) or "body" not in entry:
        raise ApiError(400, 10207, "A message needs a body")
    content_type = entry.get("content_type", "json")
    if content_type == "json":
        body = json.dumps(entry["body"], separators=(",", ":"), ensure_ascii=False)
    elif content_type == "text" and isinstance(entry["body"], str):
        body = entry["body"]
    else:
        raise ApiError(400, 10203, "Invalid message metadata: content_type")
    if size_of(body) > MAX_MESSAGE_BYTES:
        raise ApiError(400, 10204, "Message size out of bounds")
    return body, content_type, delay_of(entry.get("delay_seconds", batch_delay))


def size_of(body: str) -> int:
    """What a message counts against the limits: its body and metadata."""
    return len(body.encode()) + METADATA_BYTES
