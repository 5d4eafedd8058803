"""Internal: a run's OpenTelemetry span, Sentry scope and Sentry Crons check-ins.

:func:`observed` wraps the attempt of :meth:`Consumer.steps
<astral_taskclaim.consumer.consume.Consumer.steps>`. When the project uses
neither SDK (see :mod:`~astral_taskclaim.core.tracing`) it hands the
attempt back untouched. Otherwise the attempt runs in:

- a ``CONSUMER`` span ``process <queue>``, the child of the enqueue's span
  whose context the body carries (``messaging.*`` attributes, the key, the
  task, the attempt; the outcome as ``taskclaim.outcome`` and, but for
  ``ok``, an ``ERROR`` status with the exception recorded);
- a Sentry isolation scope of its own, tagged with the task, key, queue,
  attempt and run id, in which a failed attempt is captured
  (``TASKCLAIM_SENTRY["capture"]``) and, with tracing on, the run is a
  transaction continuing the enqueue's trace.

Span and scopes are made current only while the attempt's own code runs
(each step of the generator, and the awaiting of an ``async def`` task on
the event loop), so runs side by side on one thread never see each other's.

:func:`slot_observed` wraps the enqueue of a schedule's slot: a trace of its
own and, with ``TASKCLAIM_SENTRY["crons"]``, an ``in_progress`` check-in
whose id the body carries, closed ``ok`` or ``error`` when the run ends.
"""

from __future__ import annotations

import contextvars
import logging
import re
import time
from collections.abc import Awaitable, Callable, Generator, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from types import SimpleNamespace
from typing import Any

from astral_taskclaim.consumer.failures import describe_error
from astral_taskclaim.consumer.retry import RetryAfter
from astral_taskclaim.consumer.summary import Decision, Message
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.envelope import Envelope
from astral_taskclaim.core.tracing import (
    TRACE_FIELD,
    carrying,
    messaging_system,
    new_trace,
    otel_api,
    sentry,
    tracer,
)
from astral_taskclaim.queues import queues

logger = logging.getLogger(__name__)

Attempt = Generator[Awaitable[object], object, Decision]

#: The headers naming a schedule slot's Sentry check-in (as Sentry's own
#: Celery integration names them).
MONITOR_SLUG, CHECK_IN_ID, STARTED = (
    "sentry-monitor-slug",
    "sentry-monitor-check-in-id",
    "sentry-monitor-start-timestamp-s",
)


def observed(
    attempt: Attempt, queue: str, entry: object, found: Envelope, message: Message
) -> Attempt:
    """``attempt`` inside its span and Sentry scope, or itself when no SDK is in use."""
    otel, sdk = tracer(), sentry()
    if otel is None and sdk is None:
        return attempt
    headers = message.body.get(TRACE_FIELD) if isinstance(message.body, dict) else None
    headers = (
        {k: v for k, v in headers.items() if isinstance(v, str)}
        if isinstance(headers, dict)
        else {}
    )
    task = found.task.get("taskPath") if isinstance(found.task, dict) else None
    name = task if isinstance(task, str) else str(getattr(entry, "name", "") or queue)
    run = _Run(queue, name, found, message.attempts, headers)
    return run.steps(attempt, otel, sdk)


class _Run:
    """One attempt's span and scopes, entered around each of its steps."""

    def __init__(
        self, queue: str, task: str, found: Envelope, attempt: int, headers: dict[str, str]
    ) -> None:
        self.queue, self.task, self.found, self.attempt = queue, task, found, attempt
        self.headers = headers
        self.span: Any = None
        self.context: Any = None
        self.scopes: tuple[Any, Any] | None = None
        self.transaction: Any = None

    @property
    def tags(self) -> dict[str, Any]:
        return {
            "taskclaim.task": self.task,
            "taskclaim.key": self.found.key,
            "taskclaim.queue": self.queue,
            "taskclaim.attempt": self.attempt,
            "taskclaim.run_id": self.found.claim,
        }

    def steps(self, attempt: Attempt, otel: Any, sdk: Any) -> Attempt:
        with _unless_failing("start"):
            if otel is not None:
                self._start_span(otel)
            if sdk is not None:
                self._start_scope(sdk)
        sent: object = None
        thrown: BaseException | None = None
        try:
            while True:
                with self.entered():
                    try:
                        step = attempt.send(sent) if thrown is None else attempt.throw(thrown)
                    except StopIteration as stop:
                        decision: Decision = stop.value
                        with _unless_failing("end"):
                            self._finish(decision, sdk)
                        return decision
                try:
                    sent, thrown = (yield self._inside(step)), None
                except BaseException as error:
                    sent, thrown = None, error
        except BaseException as error:
            # Not the task's failure (that is a decision): the consumer's own.
            with _unless_failing("end"):
                self._end(None, error, sdk)
            raise

    @contextmanager
    def entered(self) -> Iterator[None]:
        """The span and scopes current inside the block."""
        with ExitStack() as stack:
            if self.context is not None:
                context = otel_api()[0]
                token = context.attach(self.context)
                stack.callback(context.detach, token)
            if self.scopes is not None:
                scope = _sentry_api().scope
                stack.enter_context(scope.use_isolation_scope(self.scopes[0]))
                stack.enter_context(scope.use_scope(self.scopes[1]))
            yield

    async def _inside(self, awaitable: Awaitable[object]) -> object:
        # An async task runs on the event loop: the span and scopes go with it.
        with self.entered():
            return await awaitable

    def _start_span(self, otel: Any) -> None:
        context, propagate, trace = otel_api()
        # A body without a trace starts one, whatever the worker's thread has current.
        parent = propagate.extract(self.headers, context=context.Context())
        try:
            system = messaging_system(queues[self.queue])
        except Exception:  # a consumer of a queue not in the settings
            system = "taskclaim"
        attributes = {
            "messaging.system": system,
            "messaging.destination.name": self.queue,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.message.id": self.found.claim,
            **self.tags,
        }
        kind = trace.SpanKind.CONSUMER
        self.span = otel.start_span(
            f"process {self.queue}", context=parent, kind=kind, attributes=attributes
        )
        self.context = trace.set_span_in_context(self.span, parent)

    def _start_scope(self, sdk: Any) -> None:
        api = _sentry_api()
        source = api.tracing.TransactionSource.TASK
        self.scopes = (sdk.get_isolation_scope().fork(), sdk.get_current_scope().fork())
        with self.entered():
            isolation = self.scopes[0]
            isolation.clear_breadcrumbs()
            isolation.add_event_processor(_without_failure_records)
            for tag, value in self.tags.items():
                isolation.set_tag(tag, str(value))
            isolation.set_transaction_name(self.task, source=source)
            if api.tracing_utils.has_tracing_enabled(sdk.get_client().options):
                found = sdk.continue_trace(
                    self.headers, op="queue.process", name=self.task, source=source
                )
                found.set_data("messaging.destination.name", self.queue)
                found.set_data("messaging.message.id", self.found.claim)
                found.set_data("messaging.message.retry.count", max(self.attempt - 1, 0))
                self.transaction = sdk.start_transaction(found, origin="auto.queue.taskclaim")
                self.scopes[1].span = self.transaction

    def _finish(self, decision: Decision, sdk: Any) -> None:
        error = decision.exception
        if sdk is not None and error is not None and _captures(decision):
            # In a context of its own: Sentry's deduplication (a context
            # variable) saw this exception in the give-up's log record, whose
            # event _without_failure_records dropped for this one.
            contextvars.Context().run(self._capture, sdk, error)
        self._end(decision, error, sdk)

    def _capture(self, sdk: Any, error: BaseException) -> None:
        with self.entered():
            sdk.capture_exception(error)

    def _end(self, decision: Decision | None, error: BaseException | None, sdk: Any) -> None:
        outcome = decision.outcome if decision is not None else "interrupted"
        if self.span is not None:
            trace = otel_api()[2]
            self.span.set_attribute("taskclaim.outcome", outcome)
            if error is not None:
                self.span.record_exception(error)
                self.span.set_attribute("error.type", type(error).__qualname__)
            if outcome != "ok":
                text = f"{outcome}: {type(error).__name__}" if error is not None else outcome
                self.span.set_status(trace.Status(trace.StatusCode.ERROR, text))
            self.span.end()
        if sdk is None:
            return
        if self.transaction is not None:
            self.transaction.set_status("ok" if outcome == "ok" else "internal_error")
            self.transaction.set_tag("taskclaim.outcome", outcome)
            self.transaction.finish(scope=self.scopes[1] if self.scopes else None)
        slug, check_in = self.headers.get(MONITOR_SLUG), self.headers.get(CHECK_IN_ID)
        if slug and check_in and outcome != "retried" and app_settings.SENTRY["crons"]:
            _check_in(sdk, slug, check_in, "ok" if outcome == "ok" else "error", self.headers)


@contextmanager
def _unless_failing(stage: str) -> Iterator[None]:
    """Logs (``observe.failed``) what an SDK raised: the run goes on, and is settled."""
    try:
        yield
    except Exception as error:
        logger.warning(
            "tracing the run failed (%s): %s",
            *(stage, describe_error(error)),
            extra={"event": "observe.failed", "stage": stage},
        )


def _sentry_api() -> Any:
    """Sentry's modules this uses: called only once the project initialised it."""
    from sentry_sdk import crons, scope, tracing, tracing_utils

    return SimpleNamespace(crons=crons, scope=scope, tracing=tracing, tracing_utils=tracing_utils)


#: The consumer's log records of a failed attempt: the run's own event (as
#: ``TASKCLAIM_SENTRY`` says) stands for them, so Sentry's logging
#: integration makes no second one of them.
_FAILURE_RECORDS = frozenset({"queue.task_retrying", "queue.task_failed", "queue.task_abandoned"})


def _without_failure_records(event: Any, hint: Any) -> Any:
    record = hint.get("log_record") if isinstance(hint, dict) else None
    return None if getattr(record, "event", None) in _FAILURE_RECORDS else event


def _captures(decision: Decision) -> bool:
    """Whether the failed attempt of ``decision`` goes to Sentry (the setting)."""
    capture = app_settings.SENTRY["capture"]
    if decision.outcome == "retried":
        return capture == "failures" and not isinstance(decision.exception, RetryAfter)
    return capture is not None


def _check_in(sdk: Any, slug: str, check_in: str, status: str, headers: Mapping[str, str]) -> None:
    try:
        duration: float | None = time.time() - float(headers.get(STARTED, ""))
    except ValueError:
        duration = None
    _sentry_api().crons.capture_checkin(
        monitor_slug=slug, check_in_id=check_in, status=status, duration=duration
    )


def _monitor_slug(name: str) -> str:
    """The Sentry Crons monitor slug of schedule ``name``: lower-case
    letters, digits, ``_`` and ``-``, at most 50 characters."""
    return re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-")[:50] or "schedule"


def _monitor_config(timing: Any, grace_seconds: float) -> dict[str, Any] | None:
    """The monitor of a schedule's ``timing`` (its cron and zone, or its
    interval in minutes), or ``None`` where Sentry has no such schedule (a
    cron with seconds, an interval of seconds)."""
    margin = max(1, -(-int(grace_seconds) // 60))
    expression = getattr(timing, "expression", None)
    if isinstance(expression, str) and len(expression.split()) == 5:
        schedule: dict[str, Any] = {"type": "crontab", "value": expression}
        return {"schedule": schedule, "timezone": timing.zone_name, "checkin_margin": margin}
    seconds = getattr(timing, "seconds", None)
    if isinstance(seconds, int) and seconds % 60 == 0:
        schedule = {"type": "interval", "value": seconds // 60, "unit": "minute"}
        return {"schedule": schedule, "checkin_margin": margin}
    return None


@contextmanager
def slot_observed(schedule: Any, slot: str) -> Iterator[Callable[[str], str]]:
    """The enqueue of ``schedule``'s ``slot`` in a trace of its own and, with
    Sentry Crons, an ``in_progress`` check-in the body carries to the run,
    which closes it. Yields ``settled(outcome)``, to be called with the
    outcome: a slot that ran here (a plain function) or enqueued nothing
    (``coalesced``) is checked in ``ok`` at once; a slot that raised, ``error``."""
    attributes = {"taskclaim.schedule": schedule.name, "taskclaim.slot": slot}
    with new_trace(f"schedule {schedule.name}", attributes):
        sdk = sentry()
        if sdk is None or not app_settings.SENTRY["crons"]:
            yield str
            return
        capture_checkin = _sentry_api().crons.capture_checkin
        slug = _monitor_slug(schedule.name)
        config = _monitor_config(schedule.timing, schedule.grace_seconds)
        check_in = str(capture_checkin(slug, status="in_progress", monitor_config=config))
        headers = {MONITOR_SLUG: slug, CHECK_IN_ID: check_in, STARTED: str(time.time())}

        def settled(outcome: str) -> str:
            if outcome != "enqueued":
                _check_in(sdk, slug, check_in, "ok", headers)
            return outcome

        try:
            with carrying(headers):
                yield settled
        except BaseException:
            _check_in(sdk, slug, check_in, "error", headers)
            raise
