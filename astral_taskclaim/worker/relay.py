"""The outbox relay behind ``manage.py taskclaim_relay``.

:class:`Relay` moves the outbox rows of one remote queue (configured with
``"OPTIONS": {"outbox": True}``, see :mod:`astral_taskclaim.queues.outbox`)
to its service, a batch at a time. Per batch, in one transaction of the
claims database: take the queue's oldest rows, at most one request's worth
(``max_batch_size``: 100 for Cloudflare, 10 for SQS), with ``SELECT ... FOR
UPDATE SKIP LOCKED``; send them with the queue's ``deliver()``; delete the
rows the service accepted; commit. So:

- Nothing is lost. A row is deleted only after the service accepted it; a
  send that failed part way (:class:`~.queues.base.PartlySentError`)
  deletes only the rows sent. A relay that dies, whatever the moment,
  releases its locked rows with its connection, and the next relay sends
  them. Delivery is at least once: rows the service accepted just before
  a crash, before their delete committed, are sent again.
- Relays run side by side (for availability or throughput): each skips the
  rows another one holds.
- An outage does not stop the relay: a failed send or database error is
  logged (``relay.send_failed``, ``relay.database_error``) and the batch
  tried again after a backoff doubling from ``first_backoff`` to
  ``max_backoff`` seconds, or after the wait the service asked for with
  ``Retry-After`` (Cloudflare's REST rate limit blocks for minutes),
  whatever its length.

The batch's rows stay locked while the request runs, so the claims
database's ``idle_in_transaction_session_timeout`` (if set) must be longer
than the queue's ``timeout`` times its ``request_retries``. Shutdown is
two-stage (:mod:`~astral_taskclaim.worker.shutdown`): the first SIGTERM finishes
the batch in hand and returns; a second exits at once (its rows are sent
by the next relay).
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from django.db import Error as DjangoDatabaseError
from django.db import transaction

from astral_taskclaim.core.logtext import printable
from astral_taskclaim.core.redaction import redact_configured, redacting_filter
from astral_taskclaim.db.connections import close_connections
from astral_taskclaim.queues import create_queue
from astral_taskclaim.queues import outbox as outbox_rows
from astral_taskclaim.queues.base import PartlySentError, QueueError
from astral_taskclaim.queues.remote import RemoteQueue
from astral_taskclaim.worker.shutdown import TwoStageStop

logger = logging.getLogger(__name__)
logger.addFilter(redacting_filter)

DATABASE_ERRORS = (DjangoDatabaseError, psycopg.Error)
FIRST_BACKOFF = 1.0
MAX_BACKOFF = 300.0
POLL_INTERVAL = 1.0


@dataclass
class RelayStats:
    """What a relay did so far."""

    batches: int = 0
    sent: int = 0
    send_failures: int = 0
    database_errors: int = 0


class Relay:
    """Moves the outbox rows of queue ``queue`` (a ``TASKCLAIM_QUEUES``
    alias with an outbox) to its service; see the module docstring.

    ``poll_interval``: seconds between looks at an empty outbox. ``burst``:
    return once the outbox is empty. ``first_backoff``/``max_backoff``:
    the waits after a failure. ``backend`` replaces the configured queue;
    ``sleep`` (seconds to wait; default: wait unless stopped) and ``jitter``
    (a backoff to the wait actually taken) make time deterministic in
    tests. Raises ``ValueError`` for a queue without an outbox or a bad
    argument, ``ImproperlyConfigured`` for an unknown queue.
    """

    def __init__(
        self,
        queue: str,
        *,
        poll_interval: float = POLL_INTERVAL,
        burst: bool = False,
        first_backoff: float = FIRST_BACKOFF,
        max_backoff: float = MAX_BACKOFF,
        backend: RemoteQueue | None = None,
        sleep: Callable[[float], object] | None = None,
        jitter: Callable[[float], float] | None = None,
        exit: Callable[[int], object] = os._exit,
    ) -> None:
        found = backend if backend is not None else create_queue(queue)
        if not isinstance(found, RemoteQueue) or not found.outbox:
            raise ValueError(
                f"queue {queue!r} has no outbox: the relay serves Cloudflare and SQS queues "
                'configured with "OPTIONS": {"outbox": True}'
            )
        for name, value in (
            ("poll_interval", poll_interval),
            ("first_backoff", first_backoff),
            ("max_backoff", max_backoff),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e6:
                raise ValueError(f"{name} must be a number of seconds above 0, got {value!r}")
        self.backend = found
        self.queue = queue
        self.poll_interval = float(poll_interval)
        self.burst = bool(burst)
        self.first_backoff = float(first_backoff)
        self.max_backoff = max(float(max_backoff), self.first_backoff)
        self.stats = RelayStats()
        self.stopper = TwoStageStop("relay", f"relaying {queue}", queue=queue, exit=exit)
        self._sleep = sleep if sleep is not None else self.stopper.wait
        self._jitter = jitter if jitter is not None else _jittered
        self._backoff = self.first_backoff

    def __repr__(self) -> str:
        return f"<Relay {self.queue!r}>"

    def stop(self) -> None:
        """Finishes the batch in hand, then :meth:`run` returns."""
        self.stopper.request()

    def relay_batch(self) -> int:
        """Sends one batch and deletes what the service accepted; the number
        of rows sent (0: the outbox is empty). A failed send raises its
        error, after the rows it did send are deleted."""
        database = self.backend.database
        failure: QueueError | None = None
        with transaction.atomic(using=database):
            rows = outbox_rows.take(database, self.queue, self.backend.max_batch_size)
            if not rows:
                return 0
            sent = [id_ for id_, _ in rows]
            try:
                self.backend.deliver([body for _, body in rows])
            except PartlySentError as error:
                unsent = set(error.unsent)
                sent = [id_ for index, id_ in enumerate(sent) if index not in unsent]
                failure = error
            except QueueError as error:
                sent, failure = [], error
            outbox_rows.delete(database, sent)
        self.stats.batches += 1
        self.stats.sent += len(sent)
        logger.debug(
            "%s: relayed %d of %d outbox rows",
            *(printable(self.queue), len(sent), len(rows)),
            extra={"event": "relay.batch", "queue": self.queue, "sent": len(sent)},
        )
        if failure is not None:
            raise failure
        return len(sent)

    def run(self) -> RelayStats:
        """Relays until stopped (or, with ``burst``, until the outbox is
        empty); returns the stats."""
        logger.info(
            "relaying the outbox of %s",
            printable(self.queue),
            extra={"event": "relay.started", "queue": self.queue},
        )
        try:
            while not self.stopper.requested:
                try:
                    count = self.relay_batch()
                except QueueError as error:
                    self.stats.send_failures += 1
                    self._back_off(error, "relay.send_failed")
                    continue
                except DATABASE_ERRORS as error:
                    self.stats.database_errors += 1
                    self._close_connections()
                    self._back_off(error, "relay.database_error")
                    continue
                self._backoff = self.first_backoff
                if count == 0:
                    if self.burst:
                        break
                    self._sleep(self.poll_interval)
        finally:
            self.backend.close()
        logger.info(
            "stopped relaying %s: %d sent in %d batches",
            *(printable(self.queue), self.stats.sent, self.stats.batches),
            extra={"event": "relay.stopped", "queue": self.queue, "sent": self.stats.sent},
        )
        return self.stats

    def _back_off(self, error: BaseException, event: str) -> None:
        """Logs ``error`` and waits: the service's ``Retry-After`` if it gave
        one, else the backoff (which then doubles)."""
        asked = getattr(error, "retry_after", None)
        if isinstance(asked, int | float) and asked >= 0:
            delay = float(asked)
        else:
            delay = self._jitter(self._backoff)
            self._backoff = min(self._backoff * 2, self.max_backoff)
        # The error's text may quote a credential (a DSN, a refused header).
        shown = redact_configured(str(error), self.backend)
        logger.warning(
            "%s: %s: %s; outbox rows kept, trying again in %.1f s",
            *(printable(self.queue), type(error).__name__, printable(shown), delay),
            extra={"event": event, "queue": self.queue, "delay": delay},
        )
        self._sleep(delay)

    def _close_connections(self) -> None:
        self.backend.close()
        close_connections()


def _jittered(backoff: float) -> float:
    # Between half and all of the backoff, so relays that failed together
    # do not all come back at once.
    return backoff * random.uniform(0.5, 1.0)  # noqa: S311  (not for security)
