"""Cloudflare Queues over the REST API: push, HTTP pull and ack.

::

    TASKCLAIM_QUEUES = {
        "default": {
            "BACKEND": "astral_taskclaim.queues.cloudflare.CloudflareQueue",
            "OPTIONS": {"account_id": "...", "queue_id": "...", "api_token": "..."},
        },
    }

The queue needs an HTTP pull consumer and a token with Queues read and
write. Bodies are sent with ``content_type: "json"``, exactly the bytes
:meth:`BaseQueue.encode` produced; pulled ``json`` bodies arrive base64
encoded and are decoded here. ``429`` and ``5xx`` answers (and network
errors) are retried with exponential backoff, waiting what ``Retry-After``
asks; other errors raise :class:`CloudflareError` with Cloudflare's codes.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import random
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import httpx

from astral_taskclaim.core.redaction import redacting_filter
from astral_taskclaim.queues import cloudflare_api as api
from astral_taskclaim.queues import options as opts
from astral_taskclaim.queues.base import PartlySentError, QueueError
from astral_taskclaim.queues.cloudflare_api import CloudflareError
from astral_taskclaim.queues.messages import MessageBatch, ReceivedMessage
from astral_taskclaim.queues.options import (
    Option,
    Secret,
    flag,
    http_url,
    integer,
    number,
    secret,
    text,
)
from astral_taskclaim.queues.remote import RemoteQueue, chunks

logger = logging.getLogger(__name__)
logger.addFilter(redacting_filter)

_DEFAULT_BASE_URL = "https://api.cloudflare.com/client/v4"
#: Cloudflare's limit on one message, in decimal kilobytes, metadata included.
_MAX_MESSAGE_BYTES = 128_000
#: What Cloudflare adds to each message's size for its metadata (about).
_METADATA_BYTES = 100
#: Cloudflare's limit on the messages of one ``/messages/batch`` call.
_MAX_BATCH_BYTES = 256_000
#: The content types a consumer outside Workers can decode.
_DECODABLE = ("json", "text", "bytes")

OPTIONS = {
    "account_id": Option(text),
    "queue_id": Option(text),
    "api_token": Option(secret, secret=True),
    "base_url": Option(http_url, default=_DEFAULT_BASE_URL),
    # Seconds, as on the other queues; the API takes whole milliseconds.
    "visibility_timeout": Option(number(0.001, 43_200, unit="seconds"), default=30.0),
    "timeout": Option(number(0, 600, low_open=True), default=30.0),
    "poll_interval": Option(number(0, 60, low_open=True), default=1.0),
    "request_retries": Option(integer(0, 20), default=4),
    "backoff_seconds": Option(number(0, 60), default=0.5),
    "max_backoff_seconds": Option(number(0, 3600), default=60.0),
    "outbox": Option(flag, default=False),
}


class CloudflareQueue(RemoteQueue):
    """A Cloudflare queue with an HTTP pull consumer.

    Options: ``account_id``, ``queue_id``, ``api_token`` (required);
    ``base_url``; ``visibility_timeout`` (seconds a pulled batch stays
    leased, at most 12 hours, default 30); ``timeout`` (seconds per request, default 30);
    ``poll_interval`` (seconds between pulls while ``receive`` waits,
    default 1); ``request_retries`` (default 4), ``backoff_seconds``
    (first backoff, doubling, default 0.5) and ``max_backoff_seconds``
    (longest wait, also for ``Retry-After``; default 60); ``outbox``
    (default ``False``: send through the transactional outbox and its
    relay, see :mod:`.outbox`).
    """

    max_batch_size = 100
    max_body_bytes = _MAX_MESSAGE_BYTES - _METADATA_BYTES

    option_spec = OPTIONS
    _client: httpx.Client | None

    def __init__(self, alias: str, *, options: dict[str, Any] | None = None) -> None:
        super().__init__(alias, options=options)
        self._sleep = time.sleep

    # Sending

    def deliver_one(self, body: Any, *, delay_seconds: float = 0) -> None:
        """Pushes ``body`` (``POST .../messages``), after ``delay_seconds``
        (rounded up to whole seconds, at most 43200)."""
        delay = opts.whole_delay_seconds(delay_seconds, self.max_delay_seconds)
        self._post("", _message(self.encode(body), delay))

    def deliver(self, encoded: Sequence[bytes]) -> None:
        """Pushes ``encoded`` bodies with ``POST .../messages/batch``: one
        call per 100 messages or 256,000 bytes (Cloudflare's batch limits,
        with 100 bytes of metadata per message). Several calls are not
        atomic: one that fails after others went through raises
        :class:`PartlySentError` naming the bodies not sent."""
        sent = 0
        parts = chunks(encoded, self.max_batch_size, _MAX_BATCH_BYTES, overhead=_METADATA_BYTES)
        for chunk in parts:
            try:
                self._post(
                    "/batch", b'{"messages":[' + b",".join(_message(d, 0) for d in chunk) + b"]}"
                )
            except QueueError as error:
                if not sent:
                    raise
                raise PartlySentError(
                    f"{error} ({sent} of {len(encoded)} bodies had been sent)",
                    unsent=range(sent, len(encoded)),
                ) from error
            sent += len(chunk)

    # Receiving and settling

    def receive(self, *, max_messages: int, wait_seconds: float = 0) -> MessageBatch:
        """Pulls up to ``max_messages`` (1-100); pulls again every
        ``poll_interval`` until one arrives or ``wait_seconds`` pass."""
        count = opts.max_messages(max_messages, self.max_batch_size)
        deadline = time.monotonic() + opts.wait_seconds(wait_seconds)
        config = self.ensure_configured()
        lease_ms = round(config["visibility_timeout"] * 1000)
        request = {"batch_size": count, "visibility_timeout_ms": lease_ms}
        while True:
            result = self._post("/pull", json.dumps(request).encode())
            pulled = (result or {}).get("messages") or []
            messages = [self._decode(message) for message in pulled if self._decodable(message)]
            remaining = deadline - time.monotonic()
            if messages or remaining <= 0:
                logger.debug(
                    "%s pulled %d messages",
                    self.alias,
                    len(messages),
                    extra={"event": "queue.received", "queue": self.alias, "count": len(messages)},
                )
                return MessageBatch(self.alias, messages)
            self._sleep(min(config["poll_interval"], remaining))

    def settle(self, messages: Sequence[ReceivedMessage]) -> None:
        """One ``POST .../messages/ack`` with the batch's acks and retries."""
        acks: list[dict[str, Any]] = []
        retries: list[dict[str, Any]] = []
        for message in messages:
            if message.settlement is None:
                continue
            if not isinstance(message.receipt, str):
                raise ValueError(f"message {message.id!r} was not received from a CloudflareQueue")
            if message.settlement == "ack":
                acks.append({"lease_id": message.receipt})
            else:
                delay = opts.whole_delay_seconds(message.delay_seconds, self.max_delay_seconds)
                retries.append({"lease_id": message.receipt, "delay_seconds": delay})
        if acks or retries:
            result = self._post("/ack", json.dumps({"acks": acks, "retries": retries}).encode())
            self._check_ack_counts(result, len(acks), len(retries))

    def _check_ack_counts(self, result: Any, acks: int, retries: int) -> None:
        """Logs (``queue.settle_short``) an ack reply counting fewer acks or
        retries than were sent: those messages come back when their leases
        end (Cloudflare's warnings say why)."""
        found = result if isinstance(result, dict) else {}
        counted = (found.get("ackCount"), found.get("retryCount"))
        if counted[0] == acks and counted[1] == retries:
            return
        warnings = found.get("warnings") or []
        logger.warning(
            "%s: ack reply counts %s acks and %s retries of %d and %d sent; the others come "
            "back when their leases end: %s",
            *(self.alias, counted[0], counted[1], acks, retries),
            self.redact("; ".join(str(warning) for warning in warnings)) or "no warning given",
            extra={
                "event": "queue.settle_short",
                "queue": self.alias,
                "acks": acks,
                "ack_count": counted[0],
                "retries": retries,
                "retry_count": counted[1],
            },
        )

    def _decodable(self, message: dict[str, Any]) -> bool:
        """Whether ``message`` has a content type this consumer can read.

        A ``v8`` body (a Worker's structured clone) can only be read inside
        a Worker. It is never acked, so it is not lost: its lease runs out,
        Cloudflare delivers it again and, after the consumer's
        ``max_retries``, moves it to the dead-letter queue."""
        content_type = _content_type(message)
        if content_type in _DECODABLE:
            return True
        logger.error(
            "%s message %s has content type %r, which only a Worker can decode; left to the "
            "queue's retries and dead-letter queue. Send JSON from the producer Worker: give it "
            "a compatibility date of 2024-03-18 or later, or send with "
            '{ contentType: "json" }',
            *(self.alias, message.get("id"), content_type),
            extra={
                "event": "queue.content_type_unsupported",
                "queue": self.alias,
                "content_type": content_type,
            },
        )
        return False

    def _decode(self, message: dict[str, Any]) -> ReceivedMessage:
        content_type = _content_type(message)
        raw = message.get("body")
        body: Any = raw
        try:
            if content_type == "json":
                body = json.loads(base64.b64decode(raw or "", validate=True))
            elif content_type == "bytes":
                body = base64.b64decode(raw or "", validate=True)
        except (ValueError, binascii.Error, RecursionError) as error:
            # Valid JSON may nest deeper than Python's decoder goes: the body
            # then reaches the consumer as text, acked there as malformed.
            body = raw
            logger.warning(
                "%s message %s has an undecodable body: %s",
                self.alias,
                message.get("id"),
                error,
                extra={"event": "queue.body_undecodable", "queue": self.alias},
            )
        return ReceivedMessage(
            body=body,
            attempts=int(message.get("attempts") or 1),
            receipt=message.get("lease_id"),
            id=str(message.get("id", "")),
        )

    # HTTP

    def _post(self, action: str, content: bytes) -> Any:
        config = self.ensure_configured()
        token: Secret = config["api_token"]
        redact = self.redact
        if self._client is None:
            self._client = httpx.Client(
                timeout=config["timeout"],
                headers={
                    "Authorization": f"Bearer {token.reveal()}",
                    "Content-Type": "application/json",
                },
            )
        account, queue_id = quote(config["account_id"], safe=""), quote(config["queue_id"], safe="")
        url = f"{config['base_url']}/accounts/{account}/queues/{queue_id}/messages{action}"
        where = f"Cloudflare queue {self.alias!r} (messages{action})"
        for attempt in range(config["request_retries"] + 1):
            retry_after: float | None = None
            try:
                response = self._client.post(url, content=content)
            except httpx.TransportError as error:
                status, failure = None, f"{type(error).__name__}: {error}"
            else:
                status = response.status_code
                if status < 400:
                    return api.result(response, where, redact)
                if status != 429 and status < 500:
                    raise api.error(response, where, redact, send=action in ("", "/batch"))
                if status == 429 and (hopeless := api.permanent(response)):
                    raise api.error(response, f"{where}: {hopeless}", redact)
                failure = api.describe(response)
                retry_after = api.retry_after(response.headers.get("Retry-After"))
            if attempt == config["request_retries"]:
                break
            backoff = min(config["backoff_seconds"] * 2**attempt, config["max_backoff_seconds"])
            wait = retry_after if retry_after is not None else backoff * random.uniform(0.5, 1)  # noqa: S311
            if wait > config["max_backoff_seconds"]:
                message = f"{where}: asked to wait {wait:g} s (over max_backoff_seconds): {failure}"
                raise CloudflareError(
                    redact(message), status=status, errors=[], retry_after=retry_after
                )
            logger.warning(
                "%s: %s; retrying in %.2f s",
                where,
                redact(failure),
                wait,
                extra={
                    "event": "queue.request_retry",
                    "queue": self.alias,
                    "status": status,
                    "attempt": attempt + 1,
                    "wait_seconds": wait,
                },
            )
            self._sleep(wait)
        message = f"{where}: gave up after {attempt + 1} attempts: {failure}"
        raise CloudflareError(redact(message), status=status, errors=[], retry_after=retry_after)


def _message(data: bytes, delay: int) -> bytes:
    # ``data`` is already JSON: embed it as is, so what was measured is sent.
    head = b'{"content_type":"json",' + (b'"delay_seconds":%d,' % delay if delay else b"")
    return head + b'"body":' + data + b"}"


def _content_type(message: dict[str, Any]) -> str:
    return str((message.get("metadata") or {}).get("CF-Content-Type", "json"))
