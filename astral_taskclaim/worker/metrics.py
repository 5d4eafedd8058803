"""Prometheus metrics: a worker's counters, queue depths and claims.

Needs the ``prometheus_client`` package (extra ``astral-taskclaim[prometheus]``).
Two ways to expose them:

- ``manage.py consume_claimed QUEUE --metrics-port 9108`` serves the
  worker's counters and run durations, and the depth of its queue, on
  ``http://<host>:9108/metrics``.
- :func:`metrics_view` serves the depth of every queue and the claims from
  a Django URL (the worker counters live in the worker processes)::

      path("internal/taskclaim-metrics", metrics_view)

  Route it where only your scraper reaches it: it needs no login.

=======================================================  =========  ======================
Metric                                                   Type       Labels
=======================================================  =========  ======================
``taskclaim_worker_messages_total``                      counter    ``queue``, ``outcome``
``taskclaim_worker_batches_total``                       counter    ``queue``
``taskclaim_worker_database_errors_total``               counter    ``queue``
``taskclaim_worker_unknown_task_messages_total``         counter    ``queue``
``taskclaim_worker_timed_out_messages_total``            counter    ``queue``
``taskclaim_worker_hung_runs_total``                     counter    ``queue``
``taskclaim_worker_concurrency_limited_messages_total``  counter    ``queue``
``taskclaim_task_run_duration_seconds``                  histogram  ``queue``, ``outcome``
``taskclaim_queue_messages``                             gauge      ``queue``, ``state``
``taskclaim_queue_oldest_message_age_seconds``           gauge      ``queue``
``taskclaim_claims``                                     gauge      ``state``
=======================================================  =========  ======================

``outcome`` is ``ok``, ``retried``, ``failed``, ``malformed``,
``unparseable`` or ``returned`` (received, then handed back unrun at a stop
or a database error); ``unknown_task_messages`` counts, among the retried,
the messages sent again to wait for a worker that has their task;
``timed_out_messages``, among the retried and failed, the attempts that ran
past their time limit, and ``hung_runs`` those of sync tasks left running
on their thread (the worker then exits for a restart);
``concurrency_limited_messages``, among the retried, those sent again to
wait for a slot of their concurrency group; ``state``
is ``ready``, ``delayed`` or ``leased`` for messages, ``active`` or
``expired`` for claims.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, connections
from django.http import HttpRequest, HttpResponse

__all__ = ["metrics_view", "serve", "worker_registry"]

try:
    from prometheus_client import (
        CONTENT_TYPE_LATEST,
        CollectorRegistry,
        Histogram,
        generate_latest,
        start_http_server,
    )
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    from prometheus_client.registry import Collector
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "astral_taskclaim.worker.metrics needs prometheus_client: "
        'pip install "astral-taskclaim[prometheus]"'
    ) from error

from astral_taskclaim.claims.status import claim_counts, queue_status
from astral_taskclaim.core.conf import app_settings

if TYPE_CHECKING:
    from astral_taskclaim.consumer.summary import TaskRun
    from astral_taskclaim.worker.loop import Worker

logger = logging.getLogger(__name__)

_OUTCOMES = ("ok", "retried", "failed", "malformed", "unparseable", "superseded", "returned")
_STATES = ("ready", "delayed", "leased")


class _WorkerCollector(Collector):
    """The counters of :class:`~astral_taskclaim.worker.loop.Worker` objects (one
    per queue), read at scrape time."""

    def __init__(self, *workers: Worker) -> None:
        self.workers = workers

    def collect(self) -> Iterator[CounterMetricFamily]:
        messages = CounterMetricFamily(
            "taskclaim_worker_messages",
            "Messages a worker settled, by outcome.",
            labels=["queue", "outcome"],
        )
        batches = CounterMetricFamily(
            "taskclaim_worker_batches", "Batches a worker received.", labels=["queue"]
        )
        errors = CounterMetricFamily(
            "taskclaim_worker_database_errors",
            "Database or queue errors it recovered from.",
            labels=["queue"],
        )
        unknown = CounterMetricFamily(
            "taskclaim_worker_unknown_task_messages",
            "Messages a worker sent again to wait for a worker that has their task.",
            labels=["queue"],
        )
        timed_out = CounterMetricFamily(
            "taskclaim_worker_timed_out_messages",
            "Attempts that ran past their time limit (retried or failed).",
            labels=["queue"],
        )
        hung = CounterMetricFamily(
            "taskclaim_worker_hung_runs",
            "Sync runs left running past their time limit; the worker exits for a restart.",
            labels=["queue"],
        )
        limited = CounterMetricFamily(
            "taskclaim_worker_concurrency_limited_messages",
            "Messages a worker sent again to wait for a slot of their concurrency group.",
            labels=["queue"],
        )
        for worker in self.workers:
            stats, queue = worker.stats, worker.queue
            for outcome in _OUTCOMES:
                messages.add_metric([queue, outcome], getattr(stats, outcome))
            batches.add_metric([queue], stats.batches)
            errors.add_metric([queue], stats.database_errors)
            unknown.add_metric([queue], stats.unknown_task)
            timed_out.add_metric([queue], stats.timed_out)
            hung.add_metric([queue], stats.hung)
            limited.add_metric([queue], stats.concurrency_limited)
        yield from (messages, batches, errors, unknown, timed_out, hung, limited)


class _QueueCollector(Collector):
    """Queue depths (``status()`` of each backend) and, optionally, claim
    counts, asked at scrape time. ``close_connections``: close this
    thread's database connections afterwards (a scrape thread of its own)."""

    def __init__(
        self, queues: Sequence[str], *, claims: bool = True, close_connections: bool = False
    ) -> None:
        self.queues = list(queues)
        self.claims = claims
        self.close_connections = close_connections

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            yield from self._collect()
        finally:
            if self.close_connections:
                connections.close_all()

    def _collect(self) -> Iterable[GaugeMetricFamily]:
        depth = GaugeMetricFamily(
            "taskclaim_queue_messages", "Messages in a queue, by state.", labels=["queue", "state"]
        )
        age = GaugeMetricFamily(
            "taskclaim_queue_oldest_message_age_seconds",
            "Age of a queue's oldest message.",
            labels=["queue"],
        )
        for name in self.queues:
            found = queue_status(name)
            if found["error"] is not None:
                logger.warning(
                    "metrics: queue %s: %s",
                    *(name, found["error"]),
                    extra={"event": "metrics.queue_failed", "queue": name},
                )
                continue
            for state in _STATES:
                if found[state] is not None:
                    depth.add_metric([name, state], found[state])
            if found["oldest_age_seconds"] is not None:
                age.add_metric([name], found["oldest_age_seconds"])
        yield depth
        yield age
        if self.claims:
            claims = GaugeMetricFamily(
                "taskclaim_claims", "Claims in TASKCLAIM_DATABASE, by state.", labels=["state"]
            )
            try:
                for state, count in claim_counts().items():
                    claims.add_metric([state], count)
            except DatabaseError as error:
                logger.warning(
                    "metrics: claims: %s", error, extra={"event": "metrics.claims_failed"}
                )
            yield claims


class _RunDurations:
    """A ``Worker(on_run=...)`` callback timing each run in a histogram."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.histogram = Histogram(
            "taskclaim_task_run_duration_seconds",
            "How long a claimed task's run took, by outcome.",
            labelnames=["queue", "outcome"],
            registry=registry,
        )

    def __call__(self, run: TaskRun) -> None:
        self.histogram.labels(run.queue, run.outcome).observe(run.duration_seconds)


def worker_registry(*workers: Worker) -> tuple[CollectorRegistry, _RunDurations]:
    """A registry with the ``workers``' counters and their queues' depths,
    and the ``on_run`` callback that fills their duration histogram."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(_WorkerCollector(*workers))
    queues = [worker.queue for worker in workers]
    registry.register(_QueueCollector(queues, claims=False, close_connections=True))
    return registry, _RunDurations(registry)


def serve(registry: CollectorRegistry, port: int, address: str = "127.0.0.1") -> Any:
    """Serves ``registry`` on ``http://address:port/metrics`` from a daemon
    thread; on the loopback interface unless another ``address`` is given."""
    return start_http_server(port, addr=address, registry=registry)


def metrics_view(request: HttpRequest) -> HttpResponse:
    """Every queue's depth and the claims, in Prometheus' text format."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(_QueueCollector(list(app_settings.QUEUES)))
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
