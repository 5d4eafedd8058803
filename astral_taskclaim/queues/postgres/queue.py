"""The PostgreSQL queue: messages in ``taskclaim.message``, next to the claims.

The default backend; no other service is needed::

    TASKCLAIM_QUEUES = {
        "default": {
            "BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue",
            "OPTIONS": {"visibility_timeout": 60, "poll_interval": 2},
        },
    }

``send`` joins the caller's transaction (``transactional``). ``receive``
leases rows with ``FOR UPDATE SKIP LOCKED`` for ``visibility_timeout``;
a dead consumer's messages come back when the lease runs out. ``settle``
and ``extend_leases`` are one statement a batch, skipping (and logging,
``queue.settle_stale``) rows whose lease another delivery took. An idle
``receive`` waits for a NOTIFY (:mod:`.listener`) or the next delayed
message, polling every ``poll_interval`` too. A row that cannot be leased
(a data error) is quarantined at ``visible_at = 'infinity'``, logged once
(``queue.message_quarantined``).

Options: ``database`` (default ``TASKCLAIM_DATABASE``), ``queue_name``
(default: the alias; at most 53 bytes), ``visibility_timeout`` (default
60 s), ``poll_interval`` (default 2 s), ``listen`` (default ``True``).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import DatabaseError, DataError, IntegrityError, connections

from astral_taskclaim.core.envelope import decode_body
from astral_taskclaim.db import statements
from astral_taskclaim.db.connections import savepoint_if_in_atomic
from astral_taskclaim.queues import options as opts
from astral_taskclaim.queues.base import BaseQueue, ClaimedInsert, QueueStatus, writer_of
from astral_taskclaim.queues.messages import MessageBatch, ReceivedMessage
from astral_taskclaim.queues.postgres.listener import Listener
from astral_taskclaim.queues.postgres.options import OPTIONS, database_problems
from astral_taskclaim.queues.runs import RunRecord, settle_recording

logger = logging.getLogger(__name__)

_CHANNEL_PREFIX = "taskclaim."
# A due message another consumer is leasing right now is free again within
# milliseconds; look again after this pause rather than a whole poll.
_MIN_PAUSE = 0.05


class PostgresQueue(BaseQueue):
    """A queue in ``taskclaim.message`` (see the module docstring)."""

    transactional = True
    supports_lease_extension = True
    records_runs = True

    option_spec = OPTIONS

    def __init__(self, alias: str, *, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(alias, options=options)
        self.database: str = self.config["database"]
        self.queue_name: str = self.config["queue_name"]
        self.visibility_timeout: float = self.config["visibility_timeout"]
        self.poll_interval: float = self.config["poll_interval"]
        self.listen: bool = self.config["listen"]
        self.listener = Listener(
            self.database, self.channel, alias=self.alias, poll_interval=self.poll_interval
        )
        # Ids of messages this consumer could not receive; never leased again.
        self._quarantined: set[int] = set()

    def check_options(self, config: dict[str, Any]) -> list[opts.Problem]:
        """W018 when ``database`` is not ``TASKCLAIM_DATABASE``."""
        return database_problems(config)

    @property
    def channel(self) -> str:
        """The NOTIFY channel consumers of this queue listen on."""
        return _CHANNEL_PREFIX + self.queue_name

    def _execute(
        self, path: str, params: dict[str, Any], *, prepare: bool = False
    ) -> list[tuple[Any, ...]]:
        self.ensure_configured()
        return statements.Connector(self.database).fetch(path, params, prepare=prepare)

    def claimed_insert(self, alias: str) -> ClaimedInsert | None:
        """``taskclaim/enqueue.sql`` (``bulk_enqueue.sql``, ``trail_many.sql``)
        when this queue lives in database ``alias``: claims and messages in
        one statement, bodies as ``encode`` writes them. A subclass
        that overrides ``send`` or ``send_many`` has them called instead,
        after the claim."""
        kind = type(self)
        stock = kind.send is PostgresQueue.send and kind.send_many is PostgresQueue.send_many
        if alias != self.database or not stock:
            return None
        return ClaimedInsert(
            one="taskclaim/enqueue.sql",
            many="taskclaim/bulk_enqueue.sql",
            trail_many="taskclaim/trail_many.sql",
            params={"queue": self.queue_name},
            writer=writer_of(self),
        )

    def send(self, body: Any, *, delay_seconds: float = 0) -> None:
        """Inserts ``body`` (visible after ``delay_seconds``) in the caller's
        transaction, if any."""
        delay = opts.delay_seconds(delay_seconds, self.max_delay_seconds)
        text = self.encode(body).decode("utf-8")
        params = {"queue": self.queue_name, "body": text, "delay": delay}
        self._execute("queue/send.sql", params)

    def send_many(self, bodies: Sequence[Any]) -> None:
        """Inserts ``bodies`` in one statement, in order: all or none."""
        self.check_batch(bodies)
        texts = [self.encode(body).decode("utf-8") for body in bodies]
        if texts:
            self._execute("queue/send_many.sql", {"queue": self.queue_name, "bodies": texts})

    def receive(self, *, max_messages: int, wait_seconds: float = 0) -> MessageBatch:
        """Leases up to ``max_messages`` messages; waits up to
        ``wait_seconds`` (NOTIFY or polling) for the first."""
        limit = opts.max_messages(max_messages, self.max_batch_size)
        wait = opts.wait_seconds(wait_seconds)
        self.ensure_configured()
        deadline = time.monotonic() + wait
        # LISTEN before looking, so a message sent in between still wakes us.
        listening = wait > 0 and self.listen and self.listener.start()
        while True:
            messages = self._lease(limit)
            remaining = deadline - time.monotonic()
            if messages or remaining <= 0:
                return MessageBatch(self.name, messages)
            pause = min(remaining, self.poll_interval)
            due_in = self._next_visible()
            if due_in is not None:
                pause = min(pause, max(due_in, _MIN_PAUSE))
            if listening:
                listening = self.listener.wait(pause)
            else:
                time.sleep(pause)

    def _lease(self, limit: int) -> list[ReceivedMessage]:
        lease = str(uuid.uuid4())
        # Autocommit: no wait for the lease's WAL flush (see queue/receive.sql).
        relaxed = connections[self.database].get_autocommit()
        rows: list[tuple[Any, ...]] = []
        while len(rows) < limit:
            params = {
                "queue": self.queue_name,
                "limit": limit - len(rows),
                "lease": lease,
                "visibility": self.visibility_timeout,
                "skip": sorted(self._quarantined),
                "only": None,
                "relaxed": relaxed,
            }
            try:
                with savepoint_if_in_atomic(self.database):
                    rows += self._execute("queue/receive.sql", params, prepare=True)
                break
            except (DataError, IntegrityError):
                # Some row of the batch cannot be leased: lease them one by
                # one, setting aside the ones that fail, then fill the batch.
                leased, set_aside = self._lease_one_by_one(params)
                rows += leased
                if not set_aside:
                    break
        return [
            ReceivedMessage(
                body=decode_body(body),
                attempts=attempts,
                receipt=(id_, lease),
                id=str(id_),
                unsettled_before=unsettled,
            )
            for id_, body, attempts, unsettled in rows
        ]

    def _lease_one_by_one(self, params: dict[str, Any]) -> tuple[list[tuple[Any, ...]], bool]:
        """The rows leased, and whether some message was quarantined."""
        leased: list[tuple[Any, ...]] = []
        set_aside = False
        for (id_,) in self._execute("queue/due_ids.sql", params):
            try:
                with savepoint_if_in_atomic(self.database):
                    leased += self._execute("queue/receive.sql", {**params, "only": id_})
            except (DataError, IntegrityError) as error:
                self._quarantine(id_, error)
                set_aside = True
        return leased, set_aside

    def _quarantine(self, id_: int, error: DatabaseError) -> None:
        try:
            with savepoint_if_in_atomic(self.database):
                self._execute("queue/quarantine.sql", {"id": id_})
            where = "parked with visible_at 'infinity'"
        except DatabaseError:
            # Left as it is: this consumer skips it until it restarts.
            self._quarantined.add(id_)
            where = "skipped by this consumer (parking it failed too)"
        logger.error(
            "%s: message %s cannot be received (%s: %r); quarantined: %s",
            *(self.alias, id_, type(error.__cause__ or error).__name__, str(error), where),
            extra={"event": "queue.message_quarantined", "queue": self.alias, "message_id": id_},
        )

    def _next_visible(self) -> float | None:
        rows = self._execute("queue/next_visible.sql", {"queue": self.queue_name})
        value = rows[0][0] if rows else None
        return None if value is None else float(value)

    def status(self) -> QueueStatus:
        """Ready, delayed and leased messages and the oldest one's age."""
        rows = self._execute("queue/status.sql", {"queue": self.queue_name})
        ready, delayed, leased, oldest = rows[0]
        return QueueStatus(ready, delayed, leased, None if oldest is None else float(oldest))

    def task_names(self) -> list[tuple[object, int]]:
        """How many messages name each task: ``(name, count)`` pairs, the
        name as the body gives it (``None``: it names none)."""
        rows = self._execute("queue/task_names.sql", {"queue": self.queue_name})
        return [(None if name is None else json.loads(name), count) for name, count in rows]

    def settle(self, messages: Sequence[ReceivedMessage]) -> None:
        """Deletes the acked and delays the retried messages, wakes waiting
        consumers for retries due at once and records the claimed-task runs
        the messages carry (:func:`~astral_taskclaim.queues.runs.settle_recording`):
        one statement (``queue/settle.sql``) whatever the batch, so one round trip."""
        acks: list[tuple[int, str]] = []
        retries: list[tuple[int, str, float, str | None, bool, bool]] = []
        runs: list[tuple[int | None, RunRecord]] = []
        for message in messages:
            if message.settlement is None:
                continue
            id_, lease = _receipt(message)
            if message.run is not None:
                runs.append((id_, message.run))
            if message.settlement == "ack":
                acks.append((id_, lease))
            else:
                delay = float(message.delay_seconds)
                unrun = message.handed_back
                suspect = unrun and message.unsettled_before
                retries.append((id_, lease, delay, message.last_error, unrun, suspect))
        if not acks and not retries:
            return
        self.ensure_configured()
        params = {
            "ack_ids": [id_ for id_, _ in acks],
            "ack_leases": [lease for _, lease in acks],
            "retry_ids": [retry[0] for retry in retries],
            "retry_leases": [retry[1] for retry in retries],
            "delays": [retry[2] for retry in retries],
            "errors": [retry[3] for retry in retries],
            "unrun": [retry[4] for retry in retries],
            "suspect": [retry[5] for retry in retries],
            "channel": self.channel,
        }
        rows = settle_recording(self.database, "queue/settle.sql", params, runs, queue=self.alias)
        [(settled, _woken)] = rows
        stale = len(acks) + len(retries) - settled
        if stale:
            self._log_stale_settlements(
                stale, advice="raise visibility_timeout above a batch's run time"
            )

    def lease_seconds(self) -> float:
        """``visibility_timeout``: how long a receive leases its messages."""
        return self.visibility_timeout

    def extend_leases(
        self, messages: Sequence[ReceivedMessage], *, seconds: float
    ) -> list[ReceivedMessage]:
        """Leases of ``messages`` end ``seconds`` from now (never earlier
        than they did), for the rows still under the lease each was received
        with: one statement (``queue/extend.sql``). Returns those extended;
        safe from another thread (it uses that thread's connection)."""
        seconds = opts.lease_seconds(seconds, self.max_delay_seconds)
        receipts = {_receipt(message): message for message in messages}
        if not receipts:
            return []
        params = {
            "ids": [id_ for id_, _ in receipts],
            "leases": [lease for _, lease in receipts],
            "seconds": seconds,
        }
        extended = {id_ for (id_,) in self._execute("queue/extend.sql", params)}
        return [message for (id_, _), message in receipts.items() if id_ in extended]

    def close(self) -> None:
        """Closes the LISTEN connection (Django closes its own)."""
        self.listener.close()


def _receipt(message: ReceivedMessage) -> tuple[int, str]:
    receipt = message.receipt
    if (
        not isinstance(receipt, tuple)
        or len(receipt) != 2
        or not isinstance(receipt[0], int)
        or not isinstance(receipt[1], str)
    ):
        raise ValueError(f"message {message.id!r} was not received from a PostgresQueue")
    return receipt[0], receipt[1]
