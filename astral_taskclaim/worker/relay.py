"""The outbox relay behind ``manage.py taskclaim_relay``.

:class:`Relay` moves the outbox rows of one remote queue (configured with
``"OPTIONS": {"outbox": True}``, see :mod:`astral_taskclaim.queues.outbox`)
to its service, a batch at a time. Per batch, in one transaction of the
claims database: take the queue's due rows (not set aside, their
``available_at`` reached: a deferred task's run time, or the end of a
row's backoff), earliest first, at most one request's worth
(``max_batch_size``: 100 for Cloudflare, 10 for SQS), with ``SELECT ... FOR
UPDATE SKIP LOCKED``; send them with the queue's ``deliver()``; delete the
rows the service accepted, record each failure on its row (``attempts``,
``last_error``); commit. So:

- Nothing is lost. A row is deleted only after the service accepted it; a
  send that failed part way (:class:`~.queues.base.PartlySentError`)
  deletes only the rows sent. A relay that dies, whatever the moment,
  releases its locked rows with its connection, and the next relay sends
  them. Delivery is at least once: rows the service accepted just before
  a crash, before their delete committed, are sent again.
- One row never blocks the others. A request the service refuses for what
  it holds (:class:`~.queues.remote.RequestRefusedError`) is halved until
  the culprit is alone; a row refused for good (alone, or an SQS entry with
  ``SenderFault``) is set aside at once (``relay.row_set_aside``), its claim
  released (a Django Task's run failed). One refused for a passing fault
  waits out its own backoff (``relay.row_delayed``) while the rest flows.
- Relays run side by side: each skips the rows another one holds.
- An outage does not stop the relay: a failed request or database error is
  logged (``relay.send_failed``, ``relay.database_error``) and the batch
  tried again after a backoff doubling from ``first_backoff`` to
  ``max_backoff`` seconds, or after the ``Retry-After`` the service asked.

The batch's rows stay locked while the request runs, so the claims
database's ``idle_in_transaction_session_timeout`` (if set) must be longer
than the queue's ``timeout`` times its ``request_retries``. Shutdown is
two-stage (:mod:`~astral_taskclaim.worker.shutdown`): the first SIGTERM finishes
the batch in hand and returns; a second exits at once (its rows are sent
by the next relay). With ``burst``, the relay returns once no row is due:
rows deferred or waiting out their backoff are left to the next run.
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from django.db import transaction

from astral_taskclaim.claims.claim import release_task
from astral_taskclaim.core.envelope import parse_body
from astral_taskclaim.core.logtext import printable
from astral_taskclaim.core.redaction import redact_configured, redacting_filter
from astral_taskclaim.db import statements
from astral_taskclaim.db.connections import close_connections
from astral_taskclaim.queues import create_queue
from astral_taskclaim.queues import outbox as outbox_rows
from astral_taskclaim.queues.base import PartlySentError, QueueError
from astral_taskclaim.queues.outbox import Failure, Row
from astral_taskclaim.queues.remote import EntriesRefusedError, RemoteQueue, RequestRefusedError
from astral_taskclaim.worker.shutdown import DATABASE_ERRORS, Backoff, TwoStageStop

__all__ = ["Relay", "RelayStats"]

logger = logging.getLogger(__name__)
logger.addFilter(redacting_filter)

FIRST_BACKOFF = 1.0
MAX_BACKOFF = 300.0
POLL_INTERVAL = 1.0
#: A row's last error is kept up to this many characters.
ERROR_CHARS = 2000


@dataclass
class RelayStats:
    """What a relay did so far."""

    batches: int = 0
    sent: int = 0
    send_failures: int = 0
    database_errors: int = 0
    #: Rows the service refused for good, set aside.
    set_aside: int = 0
    #: Rows refused for a passing fault, waiting out their own backoff.
    delayed: int = 0


@dataclass
class _Outcome:
    """What became of a batch's rows: sent, failed (each with its record),
    and the failure of a whole request that the relay backs off from."""

    sent: list[int] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    dead: list[tuple[Row, str]] = field(default_factory=list)
    error: QueueError | None = None


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
        self.stats = RelayStats()
        self.stopper = TwoStageStop("relay", f"relaying {queue}", queue=queue, exit=exit)
        self._sleep = sleep if sleep is not None else self.stopper.wait
        self._jitter = jitter if jitter is not None else _jittered
        self._backoff = Backoff(float(first_backoff), float(max_backoff))

    def __repr__(self) -> str:
        return f"<Relay {self.queue!r}>"

    def stop(self) -> None:
        """Finishes the batch in hand, then :meth:`run` returns."""
        self.stopper.request()

    def relay_batch(self) -> int:
        """Sends one batch of due rows, deletes what the service accepted and
        records the failures on the other rows (setting aside those refused
        for good, releasing their claims); the number of rows taken (0: none
        is due). A failed request raises its error once that is recorded."""
        database = self.backend.database
        with transaction.atomic(using=database):
            rows = outbox_rows.take(database, self.queue, self.backend.max_batch_size)
            if not rows:
                return 0
            done = _Outcome()
            self._deliver(rows, done)
            outbox_rows.delete(database, done.sent)
            outbox_rows.record_failures(database, done.failures)
            for row, reason in done.dead:
                self._release_claim(row, reason)
        self.stats.batches += 1
        self.stats.sent += len(done.sent)
        self.stats.set_aside += len(done.dead)
        self.stats.delayed += sum(failure.delay is not None for failure in done.failures)
        logger.debug(
            "%s: relayed %d of %d outbox rows",
            *(printable(self.queue), len(done.sent), len(rows)),
            extra={"event": "relay.batch", "queue": self.queue, "sent": len(done.sent)},
        )
        self._log_row_failures(done)
        if done.error is not None:
            raise done.error
        return len(rows)

    def _deliver(self, rows: Sequence[Row], done: _Outcome) -> None:
        """Sends ``rows`` and sorts each into ``done``."""
        try:
            self.backend.deliver([row.body for row in rows])
        except RequestRefusedError as error:
            self._split(rows, done, error)
        except PartlySentError as error:
            unsent = set(error.unsent)
            done.sent += [row.id for index, row in enumerate(rows) if index not in unsent]
            refused = error.refused if isinstance(error, EntriesRefusedError) else {}
            failed = error.failed if isinstance(error, EntriesRefusedError) else {}
            rest = []
            for index in sorted(unsent):
                if index in refused:
                    self._set_aside(rows[index], refused[index], done)
                elif index in failed:
                    delay = self._jitter(self._row_backoff(rows[index]))
                    done.failures.append(
                        Failure(rows[index].id, self._text(failed[index]), delay=delay)
                    )
                else:
                    rest.append(rows[index])
            if rest and isinstance(error.__cause__, RequestRefusedError):
                self._split(rest, done, error.__cause__)
            elif rest:
                self._give_back(rest, done, error)
        except QueueError as error:
            self._give_back(rows, done, error)
        else:
            done.sent += [row.id for row in rows]

    def _split(self, rows: Sequence[Row], done: _Outcome, error: RequestRefusedError) -> None:
        """Halves a refused request until the refused rows are alone; those
        are set aside. Once a request fails otherwise, the rest waits."""
        if len(rows) == 1:
            self._set_aside(rows[0], str(error), done)
            return
        middle = len(rows) // 2
        for part in (rows[:middle], rows[middle:]):
            if done.error is not None:
                self._give_back(part, done, done.error)
            elif part:
                self._deliver(part, done)

    def _set_aside(self, row: Row, reason: str, done: _Outcome) -> None:
        done.failures.append(Failure(row.id, self._text(reason), dead=True))
        done.dead.append((row, self._text(reason)))

    def _give_back(self, rows: Sequence[Row], done: _Outcome, error: QueueError) -> None:
        # The whole request failed: the rows keep their place, the relay backs off.
        text = self._text(str(error))
        done.failures += [Failure(row.id, text) for row in rows]
        done.error = error

    def _row_backoff(self, row: Row) -> float:
        return self._backoff.after(row.attempts)

    def _text(self, reason: str) -> str:
        # The service's words may quote a credential (a DSN, a refused header).
        return redact_configured(reason, self.backend)[:ERROR_CHARS]

    def _release_claim(self, row: Row, reason: str) -> None:
        """Frees the claim of a row set aside, as a failed send would: its
        key may be enqueued again (a later claim of it stays). A Django
        Task's run, whose message will never arrive, fails with ``reason``."""
        try:
            found = parse_body(json.loads(row.body))
        except (ValueError, RecursionError):
            found = None
        if found is None:
            return
        database = self.backend.database
        release_task(found.key, found.claim, using=database)
        if isinstance(found.task, dict) and "taskPath" in found.task:
            refused = f"{RequestRefusedError.__module__}.{RequestRefusedError.__qualname__}"
            params = {"id": found.claim, "exception_class_path": refused, "traceback": reason}
            statements.run(database, "tasks/fail.sql", {**params, "final": True, "relaxed": False})

    def _log_row_failures(self, done: _Outcome) -> None:
        for row, reason in done.dead:
            logger.error(
                "%s: outbox row %d set aside, the service refused it for good: %s",
                *(printable(self.queue), row.id, printable(reason)),
                extra={"event": "relay.row_set_aside", "queue": self.queue, "row": row.id},
            )
        for failure in done.failures:
            if failure.delay is not None:
                logger.warning(
                    "%s: outbox row %d not sent, trying it again in %.1f s: %s",
                    *(printable(self.queue), failure.id, failure.delay, printable(failure.error)),
                    extra={"event": "relay.row_delayed", "queue": self.queue, "row": failure.id},
                )

    def run(self) -> RelayStats:
        """Relays until stopped (or, with ``burst``, until no row is due)."""
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
                    self.backend.close()
                    close_connections()
                    self._back_off(error, "relay.database_error")
                    continue
                self._backoff.reset()
                if count == 0:
                    if self.burst:
                        break
                    self._sleep(self.poll_interval)
        finally:
            self.backend.close()
        logger.info(
            "stopped relaying %s: %d sent in %d batches, %d set aside",
            *(printable(self.queue), self.stats.sent, self.stats.batches, self.stats.set_aside),
            extra={
                "event": "relay.stopped",
                "queue": self.queue,
                "sent": self.stats.sent,
                "set_aside": self.stats.set_aside,
            },
        )
        return self.stats

    def _back_off(self, error: BaseException, event: str) -> None:
        """Logs ``error`` and waits: the service's ``Retry-After`` if it gave
        one, else the backoff (which then doubles)."""
        asked = getattr(error, "retry_after", None)
        if isinstance(asked, int | float) and asked >= 0:
            delay = float(asked)
        else:
            delay = self._jitter(self._backoff.next())
        shown = self._text(str(error))
        logger.warning(
            "%s: %s: %s; outbox rows kept, trying again in %.1f s",
            *(printable(self.queue), type(error).__name__, printable(shown), delay),
            extra={"event": event, "queue": self.queue, "delay": delay},
        )
        self._sleep(delay)


def _jittered(backoff: float) -> float:
    # Between half and all of the backoff, so relays that failed together
    # do not all come back at once.
    return backoff * random.uniform(0.5, 1.0)  # noqa: S311  (not for security)
