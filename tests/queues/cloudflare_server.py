"""A local Cloudflare Queues REST API for the tests, on 127.0.0.1.

It follows Cloudflare's documented HTTP pull consumer API and refuses what
the service refuses:

- every request body is checked against the official SDK's parameter types
  (:mod:`tests.queues.cloudflare_types`): an unknown field or a wrong type
  is ``400`` (code 10207);
- ``POST /client/v4/accounts/{account}/queues/{queue}/messages`` (one
  message), ``.../messages/batch`` (at most 100 messages and 256,000 bytes,
  each message counting its body and 100 bytes of metadata),
  ``.../messages/pull`` (``batch_size`` default 5, at most 100;
  ``visibility_timeout_ms`` at most 12 hours) and ``.../messages/ack``
  (``acks`` and ``retries`` by ``lease_id``, ``delay_seconds``);
- bearer-token authentication: no token is ``401`` (code 10001), a wrong
  token or account ``403`` (code 10000); an unknown queue is ``404``
  (code 10104); answers are ``{"success", "errors", "messages", "result"}``;
- ``json`` bodies are stored as JSON text and pulled base64 encoded,
  ``text`` bodies as they are; a message over 128,000 bytes (its body and
  100 bytes of metadata) is refused (code 10204), a delay over 43200 s too
  (code 10203); :meth:`CloudflareQueuesServer.send_from_worker` stores what
  only a Worker can send (a ``v8`` body);
- sends (not pulls or acks) are rate limited as the REST API limits an
  account, 1,200 requests per 5 minutes: over it, ``429`` (code 971) with
  ``Retry-After``. The budget is per queue here, so tests sharing the server
  do not share it; :meth:`ServerQueue` ``send_limit`` changes it;
- leases: a pulled message is invisible until acked, retried or its
  visibility timeout passes; ``attempts`` counts deliveries. The ack
  reply's ``ackCount`` and ``retryCount`` count the leases applied; late
  or unknown lease ids are no-ops, with a warning. A message is
  delivered again while ``attempts <= max_retries`` (Cloudflare's default
  of 3 allows four deliveries); after that it moves to the queue's dead
  letter queue, or is deleted when there is none;
- :meth:`CloudflareQueuesServer.fail_next` makes the next requests (after
  ``after`` good ones) fail with a status (429, 5xx), a Cloudflare code and
  an optional ``Retry-After``, for the retry tests.
"""

from __future__ import annotations

import base64
import json
import math
import re
import secrets
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .cloudflare_types import (
    ERRORS,
    MAX_BATCH_BYTES,
    MAX_BATCH_COUNT,
    MAX_VISIBILITY_MS,
    ApiError,
    SchemaMismatch,
    check_request,
    delay_of,
    is_int,
    prepare,
    size_of,
)

SEND_LIMIT = (1200, 300.0)
ROUTE = re.compile(
    r"^/client/v4/accounts/(?P<account>[^/]+)/queues/(?P<queue>[^/]+)"
    r"/messages(?P<action>/pull|/ack|/batch)?/?$"
)


class RateLimited(Exception):
    """Over the send limit: retry after ``wait`` seconds."""

    def __init__(self, wait: float) -> None:
        super().__init__(wait)
        self.wait = wait


@dataclass
class StoredMessage:
    id: str
    body: str
    content_type: str
    timestamp_ms: int
    visible_at: float
    attempts: int = 0
    lease_expires: float | None = None


@dataclass
class ServerQueue:
    id: str
    name: str
    max_retries: int = 3
    dead_letter_queue: str | None = None
    retry_delay: int = 0
    visibility_timeout_ms: int = 30_000
    send_limit: tuple[int, float] = SEND_LIMIT
    messages: dict[str, StoredMessage] = field(default_factory=dict)
    sends: deque[float] = field(default_factory=deque)

    def over_send_limit(self, now: float) -> float | None:
        """Seconds to wait if one more send would pass the limit; records it if not."""
        count, window = self.send_limit
        while self.sends and self.sends[0] <= now - window:
            self.sends.popleft()
        if len(self.sends) >= count:
            return self.sends[0] + window - now
        self.sends.append(now)
        return None


@dataclass
class RecordedRequest:
    path: str
    at: float
    status: int


class CloudflareQueuesServer:
    """The API's state and a threaded HTTP server around it."""

    def __init__(self, *, account_id: str, token: str) -> None:
        self.account_id, self.token = account_id, token
        self.queues: dict[str, ServerQueue] = {}
        self.requests: list[RecordedRequest] = []
        self._leases: dict[str, tuple[str, str]] = {}
        self._failures: deque[tuple[int, str | None, int] | None] = deque()
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}/client/v4"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()

    def create_queue(self, name: str | None = None, **settings: Any) -> str:
        """A new queue's id (32 hex digits); ``settings`` as :class:`ServerQueue`."""
        queue_id = uuid.uuid4().hex
        with self._lock:
            self.queues[queue_id] = ServerQueue(queue_id, name or queue_id, **settings)
        return queue_id

    def queue_named(self, name: str) -> ServerQueue:
        return next(queue for queue in self.queues.values() if queue.name == name)

    def stored(self, queue_id: str) -> list[StoredMessage]:
        """The queue's messages, leased or not, oldest first."""
        with self._lock:
            return list(self.queues[queue_id].messages.values())

    def fail_next(
        self,
        count: int = 1,
        *,
        status: int = 429,
        retry_after: str | None = None,
        code: int | None = None,
        after: int = 0,
    ) -> None:
        """After ``after`` requests served as usual, the next ``count`` answer
        ``status`` with Cloudflare ``code`` (and ``Retry-After``)."""
        code = code if code is not None else (10250 if status == 429 else 15000)
        with self._lock:
            self._failures.extend([None] * after + [(status, retry_after, code)] * count)

    def send_from_worker(self, queue_id: str, body: bytes, content_type: str = "v8") -> None:
        """Stores a message as a Worker's ``queue.send`` does, in a content
        type the REST API does not accept (a ``v8`` structured clone)."""
        message_id = uuid.uuid4().hex
        stored = StoredMessage(
            message_id, base64.b64encode(body).decode(), content_type, int(time.time() * 1000), 0
        )
        with self._lock:
            self.queues[queue_id].messages[message_id] = stored

    # Request handling: everything below runs with the lock held.

    def handle(self, path: str, authorization: str | None, raw: bytes) -> tuple[int, Any, dict]:
        with self._lock:
            failure = self._failures.popleft() if self._failures else None
            if failure is not None:
                status, retry_after, code = failure
                headers = {"Retry-After": retry_after} if retry_after is not None else {}
                return status, _failure(code, ERRORS.get(code, "Unknown error")), headers
            try:
                answer = self._route(path, authorization, raw)
            except RateLimited as limited:
                headers = {"Retry-After": str(math.ceil(limited.wait))}
                return 429, _failure(971, ERRORS[971]), headers
            except ApiError as error:
                return error.status, _failure(error.code, error.message), {}
            return 200, {"success": True, "errors": [], "messages": [], **answer}, {}

    def _route(self, path: str, authorization: str | None, raw: bytes) -> dict[str, Any]:
        match = ROUTE.match(path)
        if match is None:
            raise ApiError(404, 7003, "No route for the URI")
        if not authorization or not authorization.startswith("Bearer "):
            raise ApiError(401, 10001, "Unable to authenticate request")
        if authorization != f"Bearer {self.token}" or match["account"] != self.account_id:
            raise ApiError(403, 10000, "Authentication error")
        queue = self.queues.get(match["queue"])
        if queue is None:
            raise ApiError(404, 10104, "Queue does not exist")
        try:
            request = json.loads(raw or b"{}")
        except ValueError:
            raise ApiError(400, 10208, "Request body is not valid JSON") from None
        action = match["action"] or ""
        try:
            if not isinstance(request, dict):
                raise SchemaMismatch("not an object")
            check_request(action, match["account"], request)
        except SchemaMismatch as error:
            raise ApiError(400, 10207, f"Request body does not match the schema: {error}") from None
        if action == "/pull":
            return {"result": self._pull(queue, request)}
        if action == "/ack":
            return {"result": self._ack(queue, request)}
        entries = request.get("messages") if action == "/batch" else [request]
        if not isinstance(entries, list) or len(entries) > MAX_BATCH_COUNT:
            raise ApiError(400, 10206, "Batch count out of bounds")
        batch_delay = delay_of(request.get("delay_seconds", 0)) if action == "/batch" else 0
        prepared = [prepare(entry, batch_delay) for entry in entries]
        if sum(size_of(body) for body, _, _ in prepared) > MAX_BATCH_BYTES:
            raise ApiError(400, 10205, "Batch size out of bounds")
        now = time.monotonic()
        wait = queue.over_send_limit(now)
        if wait is not None:
            raise RateLimited(wait)
        for body, content_type, delay in prepared:
            message_id = uuid.uuid4().hex
            queue.messages[message_id] = StoredMessage(
                message_id, body, content_type, int(time.time() * 1000), now + delay
            )
        return {"result": None}

    def _pull(self, queue: ServerQueue, request: dict[str, Any]) -> dict[str, Any]:
        batch_size = request.get("batch_size", 5)
        timeout_ms = request.get("visibility_timeout_ms")
        timeout_ms = queue.visibility_timeout_ms if timeout_ms is None else timeout_ms
        if not is_int(batch_size) or not 1 <= batch_size <= MAX_BATCH_COUNT:
            raise ApiError(400, 10207, "batch_size must be between 1 and 100")
        if not is_int(timeout_ms) or not 1 <= timeout_ms <= MAX_VISIBILITY_MS:
            raise ApiError(400, 10207, "visibility_timeout_ms must be between 1 and 43200000")
        now = time.monotonic()
        for message in list(queue.messages.values()):
            if message.lease_expires is not None and message.lease_expires <= now:
                self._failed(queue, message, now, queue.retry_delay)
        pulled = []
        for message in queue.messages.values():
            if len(pulled) == batch_size:
                break
            if message.lease_expires is None and message.visible_at <= now:
                message.attempts += 1
                message.lease_expires = now + timeout_ms / 1000
                lease_id = secrets.token_urlsafe(24)
                self._leases[lease_id] = (queue.id, message.id)
                pulled.append(_wire(message, lease_id))
        return {"message_backlog_count": len(queue.messages), "messages": pulled}

    def _ack(self, queue: ServerQueue, request: dict[str, Any]) -> dict[str, Any]:
        acks, retries = request.get("acks", []), request.get("retries", [])
        if not isinstance(acks, list) or not isinstance(retries, list):
            raise ApiError(400, 10207, "acks and retries must be arrays")
        delays = [delay_of(entry.get("delay_seconds", queue.retry_delay)) for entry in retries]
        now = time.monotonic()
        acked = retried = 0
        for entry in acks:
            message = self._leased(queue, entry.get("lease_id"))
            if message is not None:
                del queue.messages[message.id]
                acked += 1
        for entry, delay in zip(retries, delays, strict=True):
            message = self._leased(queue, entry.get("lease_id"))
            if message is not None:
                self._failed(queue, message, now, delay)
                retried += 1
        # Counted are the leases applied; a late or unknown one only warns.
        missed = len(acks) + len(retries) - acked - retried
        warnings = [f"{missed} lease ids were not found or had expired"] if missed else []
        return {"ackCount": acked, "retryCount": retried, "warnings": warnings}

    def _leased(self, queue: ServerQueue, lease_id: Any) -> StoredMessage | None:
        # Cloudflare accepts late and repeated lease ids: unknown ones are no-ops.
        owner = self._leases.get(lease_id) if isinstance(lease_id, str) else None
        if owner is None or owner[0] != queue.id:
            return None
        return queue.messages.get(owner[1])

    def _failed(self, queue: ServerQueue, message: StoredMessage, now: float, delay: int) -> None:
        message.lease_expires = None
        if message.attempts <= queue.max_retries:
            message.visible_at = now + delay
            return
        del queue.messages[message.id]
        if queue.dead_letter_queue is not None:
            target = self.queue_named(queue.dead_letter_queue)
            message.attempts, message.visible_at = 0, now
            target.messages[message.id] = message


def _wire(message: StoredMessage, lease_id: str) -> dict[str, Any]:
    body = message.body
    if message.content_type == "json":
        body = base64.b64encode(body.encode()).decode()
    return {
        "id": message.id,
        "body": body,
        "attempts": message.attempts,
        "lease_id": lease_id,
        "timestamp_ms": message.timestamp_ms,
        "metadata": {"CF-sourceMessageSource": "api", "CF-Content-Type": message.content_type},
    }


def _failure(code: int, message: str) -> dict[str, Any]:
    return {"success": False, "errors": [{"code": code, "message": message}], "messages": []}


def _handler(server: CloudflareQueuesServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, payload, headers = server.handle(
                self.path, self.headers.get("Authorization"), raw
            )
            server.requests.append(RecordedRequest(self.path, time.monotonic(), status))
            data = json.dumps(payload).encode()
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # Quiet: the tests assert on what the client logs.

    return Handler
