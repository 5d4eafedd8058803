"""Settings of the integrations' worker subprocesses: the end-to-end
tests' (queue from ``TASKCLAIM_E2E_QUEUES``), and a tracer provider sending
each span over OTLP/HTTP to ``TASKCLAIM_OBSERVE_OTLP``, as a project's
settings set one up."""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.e2e.settings import *  # noqa: F403

_provider = TracerProvider(resource=Resource.create({"service.name": "worker"}))
_exporter = OTLPSpanExporter(endpoint=os.environ["TASKCLAIM_OBSERVE_OTLP"])
_provider.add_span_processor(SimpleSpanProcessor(_exporter))
trace.set_tracer_provider(_provider)
