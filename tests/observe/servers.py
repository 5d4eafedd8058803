"""Servers the integrations' tests read back from, on 127.0.0.1 only: an
OTLP/HTTP trace collector decoding the protobuf it receives, and a Sentry
ingest endpoint (a DSN) decoding the envelopes it receives."""

from __future__ import annotations

import gzip
import json
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


@dataclass
class Received:
    """What a server decoded, in arrival order; ``arrived`` is set on each."""

    items: list[Any] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def add(self, found: list[Any]) -> None:
        with self.arrived:
            self.items.extend(found)
            self.arrived.notify_all()

    def wait_for(self, predicate: Any, timeout: float = 60) -> list[Any]:
        """The items once ``predicate(items)`` holds; fails after ``timeout``."""
        with self.arrived:
            assert self.arrived.wait_for(lambda: predicate(self.items), timeout), self.items
            return list(self.items)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return None if kind is None else getattr(any_value, kind)


def decode_spans(payload: bytes) -> list[dict[str, Any]]:
    """The spans of one ``ExportTraceServiceRequest``, as plain dicts."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(payload)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    {
                        "service": resource.get("service.name"),
                        "scope": scope_spans.scope.name,
                        "name": span.name,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "kind": span.kind,
                        "attributes": {a.key: _value(a.value) for a in span.attributes},
                        "status": span.status.code,
                        "events": [event.name for event in span.events],
                    }
                )
    return spans


def decode_envelope(payload: bytes) -> list[tuple[dict[str, Any], Any]]:
    """The ``(item header, item)`` pairs of one Sentry envelope."""
    lines = payload.split(b"\n")
    items = []
    position = 1  # past the envelope's header
    while position < len(lines) and lines[position]:
        header = json.loads(lines[position])
        body = lines[position + 1]
        items.append((header, json.loads(body)))
        position += 2
    return items


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        encoding = self.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            data = gzip.decompress(data)
        elif encoding == "deflate":
            data = zlib.decompress(data)
        self.server.received.add(self.server.decode(self.path, data))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet


class _Server(ThreadingHTTPServer):
    received: Received

    def decode(self, path: str, data: bytes) -> list[Any]:
        if path.endswith("/v1/traces"):
            return decode_spans(data)
        if path.endswith("/envelope/"):
            return decode_envelope(data)
        return []


@contextmanager
def serving() -> Iterator[tuple[str, Received]]:
    """A server on 127.0.0.1 (its base URL) and what it has received."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.received = Received()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.received
    finally:
        server.shutdown()
        server.server_close()
