"""Internal: the trace context a message carries, and the producer's span.

Neither OpenTelemetry nor Sentry is a dependency, and neither is imported
here: each is used only when the project has imported it itself
(``sys.modules``), OpenTelemetry when a tracer provider of an SDK is set,
Sentry when its client is initialised. Without either, :func:`carrier` is
empty and bodies are byte for byte what they were (and what the TypeScript
package writes).

With one of them, a body built while a span is current gains a
:data:`TRACE_FIELD`: the span's propagation headers (W3C ``traceparent``
and ``tracestate`` through OpenTelemetry's propagator; Sentry's
``sentry-trace`` and ``baggage``), which the consumer continues
(:mod:`~astral_taskclaim.consumer.observe`). :func:`traced_send` wraps the
enqueue functions in a ``PRODUCER`` span, so that span is the run's parent.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

#: The body field holding the propagation headers of the enqueuing span:
#: after the four fields, and ignored by the TypeScript consumer.
TRACE_FIELD = "trace"

#: The instrumentation scope of the spans this package starts.
SCOPE = "astral_taskclaim"

F = TypeVar("F", bound=Callable[..., Any])

# Headers a caller adds to the bodies built inside it (a schedule's Sentry
# check-in), beside the span's own.
_extra: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "taskclaim_trace_extra", default=None
)
_tracer: tuple[Any, Any] | None = None


def tracer() -> Any:
    """The OpenTelemetry tracer of this package, or ``None`` when the
    project has set no SDK tracer provider (nothing would be recorded)."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    global _tracer
    if _tracer is None or _tracer[0] is not provider:
        # Per provider, not once: a project (or a test) may set another.
        _tracer = (provider, provider.get_tracer(SCOPE))
    found = _tracer[1]
    return found


def otel_api() -> Any:
    """OpenTelemetry's API modules ``(context, propagate, trace)``: called
    only once the project has imported them (:func:`tracer` found it)."""
    from opentelemetry import context, propagate, trace

    return context, propagate, trace


def sentry() -> Any:
    """The ``sentry_sdk`` module if the project initialised its client, else ``None``."""
    sdk = sys.modules.get("sentry_sdk")
    if sdk is None or not sdk.get_client().is_active():
        return None
    return sdk


def carrier() -> dict[str, str] | None:
    """The propagation headers of the current span, or ``None``."""
    headers: dict[str, str] = {}
    trace = sys.modules.get("opentelemetry.trace")
    if trace is not None and trace.get_current_span().get_span_context().is_valid:
        otel_api()[1].inject(headers)
    sdk = sentry()
    if sdk is not None:
        for name, value in sdk.get_current_scope().iter_trace_propagation_headers():
            headers.setdefault(name, value)
    extra = _extra.get()
    if extra:
        headers.update(extra)
    return headers or None


@contextmanager
def carrying(headers: Mapping[str, str]) -> Iterator[None]:
    """Bodies built inside the block carry ``headers`` too."""
    token = _extra.set(headers)
    try:
        yield
    finally:
        _extra.reset(token)


@contextmanager
def new_trace(name: str, attributes: Mapping[str, Any]) -> Iterator[None]:
    """A root span ``name`` (a trace of its own, whatever is current) while
    the block runs; nothing without a tracer."""
    found = tracer()
    if found is None:
        yield
        return
    empty = otel_api()[0].Context()
    with found.start_as_current_span(name, context=empty, attributes=attributes):
        yield


@contextmanager
def untraced() -> Iterator[None]:
    """No span is current inside the block: bodies built there carry no trace."""
    if sys.modules.get("opentelemetry.trace") is None:
        yield
        return
    context = otel_api()[0]
    token = context.attach(context.Context())
    try:
        yield
    finally:
        context.detach(token)


def messaging_system(queue: object) -> str:
    """``messaging.system`` of ``queue``: the semantic conventions' name
    for SQS, else the backend's class name, lower case."""
    name = type(queue).__name__
    return {"SQSQueue": "aws_sqs"}.get(name, name.removesuffix("Queue").lower() or name)


def _start(found: Any, function: str, queue: Any, keys: Any) -> Any:
    destination = str(getattr(queue, "alias", ""))
    attributes: dict[str, Any] = {
        # A Tasks backend's sender wraps its queue.
        "messaging.system": messaging_system(getattr(queue, "queue", queue)),
        "messaging.destination.name": destination,
        "messaging.operation.type": "send",
        "messaging.operation.name": function,
    }
    if isinstance(keys, str):
        attributes["taskclaim.key"] = keys
    elif isinstance(keys, list | tuple):
        attributes["messaging.batch.message_count"] = len(keys)
    task_name = getattr(queue, "task_name", None)
    if isinstance(task_name, str):
        attributes["taskclaim.task"] = task_name
    return found.start_as_current_span(
        f"send {destination}", kind=otel_api()[2].SpanKind.PRODUCER, attributes=attributes
    )


def _sent(span: Any, result: object) -> None:
    if isinstance(result, str):
        span.set_attribute("messaging.message.id", result)
    span.set_attribute(
        "taskclaim.coalesced",
        result is None if not isinstance(result, list) else sum(t is None for t in result),
    )


def traced_send(function: F) -> F:
    """``function(queue, key_or_items, ...)`` (an enqueue) in a ``PRODUCER``
    span when a tracer is set: destination, key, and the claim token as the
    message id (or, for a coalesced enqueue, ``taskclaim.coalesced``)."""
    name = function.__name__
    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def traced_async(queue: Any, keys: Any, *args: Any, **kwargs: Any) -> Any:
            found = tracer()
            if found is None:
                return await function(queue, keys, *args, **kwargs)
            with _start(found, name, queue, keys) as span:
                result = await function(queue, keys, *args, **kwargs)
                _sent(span, result)
                return result

        return traced_async  # type: ignore[return-value]

    @functools.wraps(function)
    def traced(queue: Any, keys: Any, *args: Any, **kwargs: Any) -> Any:
        found = tracer()
        if found is None:
            return function(queue, keys, *args, **kwargs)
        with _start(found, name, queue, keys) as span:
            result = function(queue, keys, *args, **kwargs)
            _sent(span, result)
            return result

    return traced  # type: ignore[return-value]


@contextmanager
def sending(queue: Any, key: str, task_name: str) -> Iterator[None]:
    """The ``PRODUCER`` span of an enqueue that does not pass through
    :func:`traced_send`'s functions (the Tasks backend's one statement)."""
    found = tracer()
    if found is None:
        yield
        return
    with _start(found, "enqueue", _Named(queue, task_name), key):
        yield


class _Named:
    """``queue`` as :func:`_start` reads it, naming task ``task_name``."""

    def __init__(self, queue: Any, task_name: str) -> None:
        self.queue, self.alias, self.task_name = queue, getattr(queue, "alias", ""), task_name
