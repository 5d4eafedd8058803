"""Internal: keeping a batch's leases while a worker runs it.

A receive leases its messages for the queue's visibility timeout, and the
worker settles the whole batch once, after its last message. A batch (or a
single task) that runs longer would see its messages delivered again to
another worker while the first still holds them. Where the queue can
extend a lease (``BaseQueue.supports_lease_extension``), a
:class:`LeaseKeeper` thread extends the leases of the batch's messages every
third of the lease until the batch is settled, so a healthy worker keeps
its messages however long they run; a worker that dies stops extending, and
its messages come back when their last extension runs out.

The keeper also keeps the batch's claims (every queue, where the worker
writes claims): at once and then every third of the shortest window (at
most a minute), each unsettled message's claim that would end within two
thirds of that is made to end that long from now (``taskclaim/keep.sql``).
So a run that outlives its window still holds its key, and no other
process runs the key beside it; a dead worker's keys free at most one
window (or minute) after its last beat. The concurrency slots its runs hold are kept with them
(:mod:`~astral_taskclaim.consumer.concurrency`). A claim is kept until its
message is settled, not its batch; a trailing run's, once acked, ends then
(:meth:`LeaseKeeper.end_run`). Logs ``worker.claims_kept`` (DEBUG) after
each such write, and ``worker.claim_keeping_failed`` when it fails (the
next beat tries again).

A message is *lost* when its lease ran out before it could be extended
(the worker was stalled, or the queue unreachable, past the lease) or the
queue says another delivery holds it now: the worker does not run it, as
its new consumer does. The keeper never extends a lease it knows has run
out (counted from when the receive returned), even where the queue would
accept it (an SQS standard queue may accept an earlier receipt handle), so
a stalled worker cannot take a message back from its new consumer. Logs ``worker.lease_lost`` then,
and ``worker.lease_extension_failed`` when an extension could not be
written (the next beat tries again).

The keepers of a process share one daemon thread, started on first use and
kept: starting and joining a thread for every batch cost a draining worker
about a quarter of its time (25 µs a message in batches of 100), where
registering a batch with a waiting thread costs a lock and a notify.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from django.db import connections

from astral_taskclaim.claims.writing import discard_broken_connection
from astral_taskclaim.consumer.concurrency import held_slots, slot_seconds
from astral_taskclaim.core.envelope import Envelope, parse_body, trailing_run
from astral_taskclaim.core.logtext import printable
from astral_taskclaim.db import statements
from astral_taskclaim.queues import BaseQueue, ReceivedMessage
from astral_taskclaim.queues.postgres import PostgresQueue

logger = logging.getLogger(__name__)

#: Extensions per lease: one every third of it, so two can fail before a
#: message's lease runs out.
_BEATS_PER_LEASE = 3
#: Shortest pause between extensions, whatever the lease.
_MIN_INTERVAL = 0.05
#: The pause of a keeper with neither a lease nor a claim to keep.
_IDLE_INTERVAL = 3600.0


def lease_length(backend: BaseQueue) -> float | None:
    """``backend.lease_seconds()``, or ``None`` (logged) when the queue
    cannot be asked right now."""
    try:
        return backend.lease_seconds()
    except Exception as error:  # the worker asks again with its next batch
        logger.warning(
            "%s: cannot tell the lease's length (%s: %s); not extending this batch",
            *(backend.alias, type(error).__name__, error),
            extra={"event": "worker.lease_extension_failed", "queue": backend.alias},
        )
        return None


class LeaseKeeper:
    """Extends the leases of ``messages`` on ``backend`` by ``lease_seconds``
    (``None``: the queue cannot) every third of that, from a daemon thread,
    until :meth:`stop`, and keeps their claims on database ``claims`` (if
    given). ``leased_at`` (``time.monotonic()``, default now) is when the
    receive that leased them returned.

    Use as a context manager around running a batch; stop it before the
    batch is settled (an extension after a retry's settlement could hide the
    message longer than the retry's delay on a queue that cannot tell the
    two apart).
    """

    def __init__(
        self,
        backend: BaseQueue,
        messages: Sequence[ReceivedMessage],
        *,
        lease_seconds: float | None,
        leased_at: float | None = None,
        claims: str | None = None,
    ) -> None:
        if lease_seconds is not None and not backend.supports_lease_extension:
            raise ValueError(f"queue {backend.alias!r} cannot extend leases")
        self.backend = backend
        self.lease_seconds = lease_seconds
        lease_beat = lease_seconds / _BEATS_PER_LEASE if lease_seconds else _IDLE_INTERVAL
        self.interval = max(lease_beat, _MIN_INTERVAL)
        self.extensions = 0
        leased_at = time.monotonic() if leased_at is None else leased_at
        self._lease_end = leased_at + (lease_seconds or float("inf"))
        self._lease_due = leased_at + self.interval
        #: The claims database, and each message's envelope (parsed on the first beat).
        self._claims = claims
        self._envelopes: dict[int, Envelope] | None = None
        #: The envelopes of the messages whose claims a beat kept, by ``id()``.
        self._kept: dict[int, Envelope] = {}
        self._held = list(messages)
        self._lost: set[int] = set()
        self._lock = threading.Lock()

    def __enter__(self) -> LeaseKeeper:
        _BEATS.add(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stops extending and waits for an extension under way to end."""
        _BEATS.remove(self)

    def drop(self, messages: Sequence[ReceivedMessage]) -> None:
        """Stops extending ``messages`` (about to be settled apart from the
        rest), once an extension under way ends."""
        ids = {id(message) for message in messages}
        with self._lock:
            self._held = [message for message in self._held if id(message) not in ids]
        _BEATS.wait_idle(self)

    def lost(self, message: ReceivedMessage) -> bool:
        """Whether ``message``'s lease was taken by another delivery."""
        with self._lock:
            return id(message) in self._lost

    @property
    def lost_count(self) -> int:
        """How many of the batch's messages were lost so far."""
        with self._lock:
            return len(self._lost)

    def end_run(self, message: ReceivedMessage) -> None:
        """Once ``message``'s run ended and it was settled: an acked trailing
        run whose claim was kept frees its key a window from when its claim
        was made (:attr:`~.ReceivedMessage.claimed_at`), or now if it outlived
        that, and wakes the key's follow-up (``taskclaim/end_run.sql``). A
        failure is logged (``queue.claim_end_failed``); the claim runs out."""
        claimed_at = message.claimed_at
        if message.settlement != "ack" or claimed_at is None or not trailing_run(message.body):
            return  # a plain claimed task's claim holds its whole window
        _BEATS.wait_idle(self)  # a beat that saw it unsettled has written
        with self._lock:
            found = self._kept.get(id(message))
        backend, alias = self.backend, self._claims
        if found is None or alias is None:
            return
        left, queue = float(found.window_seconds) - (time.monotonic() - claimed_at), None
        if isinstance(backend, PostgresQueue) and backend.database == alias:
            queue = backend.queue_name  # only it can bring the follow-up forward
        params = {"key": found.key, "token": found.claim, "left": left, "queue": queue}
        try:
            statements.run(alias, "taskclaim/end_run.sql", params)
        except Exception as error:  # the claim runs out as before; the run stands
            logger.warning(
                "%s task %s: could not end its kept claim: %s: %s",
                *(printable(backend.alias), printable(found.key), type(error).__name__, error),
                extra={"event": "queue.claim_end_failed", "queue": backend.alias, "key": found.key},
            )
            discard_broken_connection(connections[alias])

    @property
    def first_beat(self) -> float:
        """Seconds from now to the first beat: at once where claims are kept
        (a claim may be about to end), else a beat's interval."""
        return 0.0 if self._claims is not None else self.interval

    def _beat(self) -> None:
        with self._lock:
            held = [message for message in self._held if id(message) not in self._lost]
        if not held:
            return
        if self._claims is not None:
            self._keep_claims(self._claims, held)
        if self.lease_seconds is not None and time.monotonic() >= self._lease_due:
            self._extend(held, self.lease_seconds)

    def _keep_claims(self, alias: str, held: list[ReceivedMessage]) -> None:
        if self._envelopes is None:
            parsed = ((id(message), parse_body(message.body)) for message in held)
            self._envelopes = {at: found for at, found in parsed if found and found.window_seconds}
            # A run's concurrency slot lasts at most its window: kept as often.
            windows = [slot_seconds(found.window_seconds) for found in self._envelopes.values()]
            if windows:
                self.interval = max(min(self.interval, min(windows) / 3), _MIN_INTERVAL)
        # A settled message's run is over: its claim is left as its run left it.
        running = [m for m in held if m.settlement is None and id(m) in self._envelopes]
        kept = [self._envelopes[id(m)] for m in running]
        if not kept:
            return
        # Held a window, at most a minute, past each beat: a dead worker's
        # keys free that soon, and a claim far from its end is not touched.
        claims = [(found.key, found.claim, slot_seconds(found.window_seconds)) for found in kept]
        claims += held_slots(found.claim for found in kept)
        keys, tokens, seconds = zip(*claims, strict=True)
        params = {"keys": list(keys), "tokens": list(tokens), "seconds": list(seconds)}
        try:
            rows = statements.run(alias, "taskclaim/keep.sql", params)
        except Exception as error:  # the next beat tries again; the runs go on
            self._failed("keep the claims", len(kept), error, "worker.claim_keeping_failed")
            return
        extended = set(rows)  # (key, token), the token as PostgreSQL spells it
        pairs = zip(running, kept, strict=True)
        with self._lock:
            self._kept.update((id(m), f) for m, f in pairs if (f.key, f.claim.lower()) in extended)
        logger.debug(
            "%s: kept %d of %d claims",
            *(self.backend.alias, len(rows), len(claims)),
            extra={"event": "worker.claims_kept", "queue": self.backend.alias, "kept": len(rows)},
        )

    def _extend(self, held: list[ReceivedMessage], lease_seconds: float) -> None:
        started = time.monotonic()
        self._lease_due = started + lease_seconds / _BEATS_PER_LEASE
        if started >= self._lease_end:
            self._lose(held, "their leases ran out before they could be extended")
            return
        try:
            kept = self.backend.extend_leases(held, seconds=lease_seconds)
        except Exception as error:  # the next beat tries again; the run goes on
            self._failed("extend the leases", len(held), error, "worker.lease_extension_failed")
            return
        self.extensions += 1
        # The queue started the new lease after the call began.
        self._lease_end = started + lease_seconds
        kept_ids = {id(message) for message in kept}
        newly_lost = [message for message in held if id(message) not in kept_ids]
        if newly_lost:
            self._lose(newly_lost, "another delivery holds them now")

    def _failed(self, what: str, count: int, error: Exception, event: str) -> None:
        logger.warning(
            "%s: could not %s of %d messages: %s: %s",
            *(self.backend.alias, what, count, type(error).__name__, error),
            extra={"event": event, "queue": self.backend.alias},
        )
        connections.close_all()

    def _lose(self, messages: list[ReceivedMessage], why: str) -> None:
        with self._lock:
            self._lost.update(id(message) for message in messages)
        logger.warning(
            "%s: %d messages not extended (%s); left to their next delivery: %s",
            *(self.backend.alias, len(messages), why, ", ".join(m.id for m in messages)),
            extra={
                "event": "worker.lease_lost",
                "queue": self.backend.alias,
                "lost": len(messages),
            },
        )


class _Beats:
    """The thread that extends every running keeper's leases, each every
    ``interval`` seconds, one extension at a time."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        #: Each running keeper and when (``time.monotonic()``) its next beat is due.
        self._due: dict[LeaseKeeper, float] = {}
        self._beating: LeaseKeeper | None = None
        self._thread: threading.Thread | None = None

    def add(self, keeper: LeaseKeeper) -> None:
        with self._condition:
            self._due[keeper] = time.monotonic() + keeper.first_beat
            # Not alive: never started, or started before this process forked.
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="taskclaim-leases", daemon=True
                )
                self._thread.start()
            self._condition.notify_all()

    def remove(self, keeper: LeaseKeeper) -> None:
        """Ends ``keeper``'s beats, once an extension of its own under way ends."""
        with self._condition:
            self._due.pop(keeper, None)
        self.wait_idle(keeper)

    def wait_idle(self, keeper: LeaseKeeper) -> None:
        """Returns once no extension of ``keeper``'s is under way."""
        with self._condition:
            while self._beating is keeper:
                self._condition.wait()

    def _run(self) -> None:
        extended = False
        while True:
            keeper = self._next(extended=extended)
            if keeper is None:
                # No batch left to keep: this thread's own database
                # connections, if it opened any, are not held meanwhile.
                connections.close_all()
                extended = False
                continue
            try:
                keeper._beat()
            finally:
                extended = True
                with self._condition:
                    if keeper in self._due:  # its interval may have shortened
                        due = time.monotonic() + keeper.interval
                        self._due[keeper] = min(self._due[keeper], due)
                    self._beating = None
                    self._condition.notify_all()

    def _next(self, *, extended: bool) -> LeaseKeeper | None:
        """Waits for the next keeper whose beat is due and marks it beating;
        ``None`` once no keeper is left, if this thread extended since it
        last closed its connections."""
        with self._condition:
            while True:
                if not self._due:
                    if extended:
                        return None
                    self._condition.wait()
                    continue
                keeper, at = min(self._due.items(), key=lambda item: item[1])
                now = time.monotonic()
                if at <= now:
                    self._due[keeper] = now + keeper.interval
                    self._beating = keeper
                    return keeper
                self._condition.wait(at - now)


_BEATS = _Beats()
