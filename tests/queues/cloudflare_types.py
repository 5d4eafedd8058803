"""Requests checked against Cloudflare's official SDK types.

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
