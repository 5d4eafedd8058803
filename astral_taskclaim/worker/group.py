"""Several queues in one worker process: ``consume_claimed q1 q2 ...``.

A :class:`WorkerGroup` runs one :class:`~astral_taskclaim.worker.loop.Worker`
per queue, each on a thread of its own with its own ``concurrency``
threads, connections and backend (a PostgreSQL queue keeps its own
``LISTEN`` wake-up, a remote queue its own client). So a queue full of slow
tasks cannot starve the others: each has its own share of threads, capped
per queue. The workers share one two-stage stop: the first signal stops
them all after their running messages, the second exits the process.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.logtext import printable
from astral_taskclaim.queues import BaseQueue
from astral_taskclaim.tasks import registry
from astral_taskclaim.worker.budget import MessageBudget
from astral_taskclaim.worker.loop import Worker
from astral_taskclaim.worker.shutdown import TwoStageStop

__all__ = ["WorkerGroup", "consumed_queues"]

logger = logging.getLogger(__name__)


def consumed_queues(named: Sequence[str]) -> list[str]:
    """``named``, without repeats; when empty, every ``TASKCLAIM_QUEUES``
    alias the task registry consumes (``LookupError`` if none)."""
    if named:
        return list(dict.fromkeys(named))
    served = registry.queues()
    found = [alias for alias in app_settings.QUEUES if alias in served]
    if not found:
        raise LookupError(f"no configured queue has a claimed task; {registry.describe()}")
    for alias in app_settings.QUEUES:
        if alias not in served:
            # Its messages would wait unseen: say so, as `check --database` would.
            logger.warning(
                "not consuming queue %s: no claimed task or Django Tasks backend is "
                "registered for it (is its tasks module imported?); name the queues to "
                "consume to leave it out on purpose",
                printable(alias),
                extra={"event": "worker.queue_not_consumed", "queue": alias},
            )
    return found


class WorkerGroup:
    """Consumes each of ``queues`` with a :class:`Worker` made with
    ``options`` (its keywords); ``caps`` maps a queue to a ``concurrency``
    of its own, overriding ``options``'s; a ``scheduler`` goes to the first
    worker only; ``max_messages`` is for the whole group: its workers stop
    once they received that many together. Raises what ``Worker`` does,
    naming the queue."""

    def __init__(
        self,
        queues: Sequence[str],
        *,
        caps: Mapping[str, int] | None = None,
        exit: Callable[[int], object] = os._exit,
        **options: Any,
    ) -> None:
        if not queues:
            raise ValueError("a WorkerGroup needs at least one queue")
        caps = dict(caps or {})
        unknown = sorted(caps.keys() - set(queues))
        if unknown:
            raise ValueError(f"a concurrency is given for queue {unknown[0]!r}, not consumed")
        self.workers: list[Worker] = []
        # One worker of the process enqueues the schedules' slots: a tick
        # per process and loop turn is all they need.
        scheduler = options.pop("scheduler", None)
        max_messages = options.pop("max_messages", None)
        if max_messages is not None:
            options["max_messages"] = MessageBudget(max_messages)
        for queue in queues:
            found = dict(options)
            if not self.workers:
                found["scheduler"] = scheduler
            if queue in caps:
                found["concurrency"] = caps[queue]
            try:
                self.workers.append(Worker(queue, exit=exit, **found))
            except (ImproperlyConfigured, TypeError, ValueError) as error:
                raise type(error)(f"queue {queue!r}: {error}") from error
        # One queue keeps its worker's own stop (its log lines name the queue).
        self.stopper = self.workers[0].stopper
        if len(self.workers) > 1:
            name = f"consuming {', '.join(queues)}"
            self.stopper = TwoStageStop("worker", name, work="the running messages", exit=exit)
            for worker in self.workers:
                worker.stopper = self.stopper
        self._failure: BaseException | None = None

    def __repr__(self) -> str:
        return f"<WorkerGroup {[worker.queue for worker in self.workers]!r}>"

    @property
    def backend(self) -> BaseQueue:
        """The first worker's queue."""
        return self.workers[0].backend

    @property
    def backends(self) -> list[BaseQueue]:
        """Each worker's queue."""
        return [worker.backend for worker in self.workers]

    def stop(self) -> None:
        """Stops every worker after its running messages."""
        self.stopper.request()

    def run(self) -> None:
        """Runs the workers until they all return; one queue runs on the
        calling thread. What one raises stops the others and is raised."""
        if len(self.workers) == 1:
            self.workers[0].run()
            return
        threads = [
            threading.Thread(target=self._run, args=(worker,), name=f"taskclaim-{worker.queue}")
            for worker in self.workers
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.5)  # a timed join lets the main thread take its signals
        if self._failure is not None:
            raise self._failure

    def _run(self, worker: Worker) -> None:
        try:
            worker.run()
        except BaseException as error:
            self._failure = self._failure or error
            self.stopper.request()
        finally:
            connections.close_all()
