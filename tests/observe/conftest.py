"""Fixtures of the integrations' tests: the real OpenTelemetry SDK and the
real sentry-sdk, each set up as a project does and taken down afterwards, so
the rest of the suite runs without them (bodies as the wire format has them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sentry_sdk
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once
from sentry_sdk.integrations.django import DjangoIntegration

from tests.observe.servers import Received, serving


def _set_provider(provider: TracerProvider | None) -> None:
    # The API sets its global provider once per process; OpenTelemetry's own
    # tests put it back the same way (opentelemetry-test-utils).
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    if provider is not None:
        trace.set_tracer_provider(provider)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """A global SDK tracer provider exporting to memory, for the test only."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "tests"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _set_provider(provider)
    yield exporter
    provider.shutdown()
    _set_provider(None)


@pytest.fixture
def otlp() -> Iterator[tuple[str, Received]]:
    """A collector on 127.0.0.1 and a global provider exporting to it over
    OTLP/HTTP: its ``/v1/traces`` URL and the spans it decoded."""
    with serving() as (url, received):
        provider = TracerProvider(resource=Resource.create({"service.name": "web"}))
        exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces")
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        _set_provider(provider)
        yield f"{url}/v1/traces", received
        provider.shutdown()
        _set_provider(None)


@pytest.fixture
def sentry() -> Iterator[Received]:
    """sentry-sdk initialised as a project does (Django integration on,
    tracing on), sending to a DSN on 127.0.0.1: the envelope items received."""
    with serving() as (url, received):
        host = url.removeprefix("http://")
        options: dict[str, Any] = {"traces_sample_rate": 1.0, "integrations": [DjangoIntegration()]}
        sentry_sdk.init(dsn=f"http://public@{host}/1", **options)
        yield received
        sentry_sdk.flush(10)
        sentry_sdk.get_client().close()
        # Sentry is off again for the tests after: no scope keeps a client.
        for scope in (
            sentry_sdk.get_global_scope(),
            sentry_sdk.get_isolation_scope(),
            sentry_sdk.get_current_scope(),
        ):
            scope.set_client(None)
