"""The part of every worker that enqueues due slots: no leader, no beat.

Each ``consume_claimed`` loop turn calls :meth:`Scheduler.tick`. A due slot's
key ``"<schedule>@<slot>"`` is claimed, the slot recorded and the task
enqueued in one transaction, so one worker wins and a slot is enqueued
once; the record only moves forward, so clock skew never doubles a slot.
(A remote queue without an outbox is sent to after the commit: at most once.)

Slots within ``grace_seconds`` are each enqueued; older missed ones follow
``missed`` (``"once"`` or ``"skip"``); a new schedule never backfills. A
schedule pg_cron runs (:mod:`astral_taskclaim.schedules.in_database`) is
left to it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connections, transaction

from astral_taskclaim.claims.claim import claim_task
from astral_taskclaim.claims.writing import discard_broken_connection, plan, resolve_alias
from astral_taskclaim.consumer.observe import slot_observed
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.envelope import PLACEHOLDER_TOKEN, message_body
from astral_taskclaim.core.logtext import printable
from astral_taskclaim.db import statements
from astral_taskclaim.queues import queues
from astral_taskclaim.schedules.in_database import SLOT_MARGIN, run_by_pg_cron
from astral_taskclaim.schedules.schedule import Schedule, declared
from astral_taskclaim.schedules.timing import slot_text
from astral_taskclaim.schedules.upkeep import builtin_schedules, cron_loaded

logger = logging.getLogger(__name__)

#: Most slots of one schedule enqueued in one turn when catching up.
MAX_CATCH_UP = 1000
#: Wait before trying a schedule again after an error (database down).
RETRY_SECONDS = 5.0

Clock = Callable[[], datetime]


def _slot_key(schedule: Schedule, slot: datetime) -> str:
    """The claim key of a slot: ``"<schedule>@<slot UTC instant>"``."""
    return f"{schedule.name}@{slot_text(slot)}"


def declared_schedules(*, alias: str | None = None) -> list[Schedule]:
    """Every schedule a worker runs: :func:`periodic` ones, ``TASKCLAIM_SCHEDULES``,
    and the upkeep where pg_cron is not loaded (asks the server)."""
    found = {s.name: s for s in declared()}
    if app_settings.UPKEEP and not cron_loaded(resolve_alias(alias)):
        found.update((s.name, s) for s in builtin_schedules())
    return sorted(found.values(), key=lambda s: s.name)


@dataclass
class _State:
    schedule: Schedule
    #: When to look at the schedule next.
    due: datetime
    #: The newest slot this process knows is handled; None: ask the table.
    done: datetime | None = None
    known: bool = False
    joins: bool | None = None


class Scheduler:
    """Enqueues due slots (see the module docstring). ``include``: the
    schedules to run (default :func:`declared_schedules`); ``clock``: the
    time now (tests)."""

    def __init__(
        self,
        *,
        using: str | None = None,
        include: Iterable[Schedule] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.using = using
        self.clock: Clock = clock or (lambda: datetime.now(UTC))
        self._include = None if include is None else list(include)
        self._states: list[_State] | None = None
        self._load_at: datetime | None = None

    def tick(self) -> int:
        """Enqueues the slots due now; how many this process won. A
        schedule's failure is logged (``schedule.failed``) and tried again
        after :data:`RETRY_SECONDS`; it never stops the caller or the
        other schedules."""
        now = self.clock()
        states = self._loaded(now)
        won = 0
        for state in states:
            if now < state.due:
                continue
            try:
                won += self._advance(state, now)
            except Exception as error:
                state.due = now + timedelta(seconds=RETRY_SECONDS)
                _log_failure(f"schedule {printable(state.schedule.name)}", error)
                # A restarted server: reconnect next time, even where nothing
                # else (a remote queue's worker, idle) would notice.
                discard_broken_connection(connections[resolve_alias(self.using)])
        return won

    def _loaded(self, now: datetime) -> list[_State]:
        if self._states is not None:
            return self._states
        if self._load_at is not None and now < self._load_at:
            return []
        try:
            found = (
                self._include if self._include is not None else declared_schedules(alias=self.using)
            )
            left = run_by_pg_cron(found, resolve_alias(self.using))
        except Exception as error:
            self._load_at = now + timedelta(seconds=RETRY_SECONDS)
            _log_failure("loading the schedules", error)
            return []
        self._states = [
            _State(s, due=now) for s in found if s.timing.problem is None and s.name not in left
        ]
        return self._states

    def _advance(self, state: _State, now: datetime) -> int:
        schedule = state.schedule
        latest = schedule.timing.latest(now)
        if latest is None or (state.done is not None and latest <= state.done):
            state.due = schedule.timing.after(now)
            return 0
        alias = resolve_alias(self.using)
        if not state.known:
            state.done, state.known = last_slot(alias, schedule.name), True
        fresh: list[datetime] = []
        missed: datetime | None = None
        for slot in schedule.timing.slots_back(now):
            if state.done is not None and slot <= state.done:
                break
            if (now - slot).total_seconds() > schedule.grace_seconds:
                missed = slot
                break
            fresh.append(slot)
            if state.done is None or len(fresh) >= MAX_CATCH_UP:
                break  # a new schedule starts at its latest slot
        todo = fresh[::-1]
        if missed is not None and state.done is not None:
            recorded = last_slot(alias, schedule.name)
            if recorded is None or recorded < missed:
                if schedule.missed == "once":
                    todo.insert(0, missed)
                else:
                    logger.info(
                        "schedule %s: skipping the slots missed up to %s",
                        *(printable(schedule.name), slot_text(missed)),
                        extra={"event": "schedule.slots_skipped", "schedule": schedule.name},
                    )
        won = sum(self._fire(state, slot, alias, now) for slot in todo)
        state.done = latest
        state.due = schedule.timing.after(now)
        return won

    def _fire(self, state: _State, slot: datetime, alias: str, now: datetime) -> int:
        schedule = state.schedule
        if state.joins is None:
            state.joins = _joins(schedule, alias)
        window = schedule.grace_seconds + SLOT_MARGIN
        key = _slot_key(schedule, slot)
        params = {"name": schedule.name, "slot": slot}
        database = statements.Connector(alias)
        with transaction.atomic(using=alias):
            if claim_task(key, window_seconds=window, using=alias) is None:
                return 0  # another worker has it
            if not database.fetch("schedule/record.sql", params):
                # The record holds this slot or a newer one, whatever the
                # clocks say and whatever became of that slot's claim:
                # enqueued already. (Before the send, so a Django Task's
                # enqueue signal is never sent for nothing.)
                transaction.set_rollback(True, using=alias)
                return 0
            if state.joins:
                outcome = _send(schedule, slot)
                database.execute("schedule/outcome.sql", {**params, "outcome": outcome})
        if not state.joins:
            try:
                outcome = _send(schedule, slot)
            except Exception as error:
                outcome = "failed"
                _log_failure(f"schedule {printable(schedule.name)} slot {slot_text(slot)}", error)
            database.execute("schedule/outcome.sql", {**params, "outcome": outcome})
        logger.info(
            "schedule %s: slot %s %s (key %s)",
            *(
                printable(schedule.name),
                slot_text(slot),
                outcome,
                printable(schedule.task_key(slot_text(slot))),
            ),
            extra={
                "event": "schedule.slot_enqueued",
                "schedule": schedule.name,
                "slot": slot_text(slot),
                "outcome": outcome,
                "late_seconds": (now - slot).total_seconds(),
            },
        )
        return 1


def last_slot(alias: str, name: str) -> datetime | None:
    """The newest slot schedule ``name`` recorded, or ``None``."""
    rows = statements.Connector(alias).fetch("schedule/last_slot.sql", {"name": name})
    return rows[0][0] if rows else None


def _joins(schedule: Schedule, alias: str) -> bool:
    """Whether the slot's enqueue can commit with its claim."""
    if schedule.kind == "function":
        return False
    target: Any = schedule.target
    if schedule.kind == "claimed":
        queue, window = queues[target.queue], target.window_seconds or 1.0
    else:
        queue, window = queues[target.get_backend().queue_for(target.queue_name)], 1.0
    body = message_body(schedule.key, PLACEHOLDER_TOKEN, window, schedule.task)
    return plan(queue, alias, function="schedule", placeholders=[body]).joins


def _send(schedule: Schedule, slot: datetime) -> str:
    """Enqueues (or runs) ``slot``: in a trace of its own, and checked in
    to Sentry Crons (:func:`~astral_taskclaim.consumer.observe.slot_observed`)."""
    with slot_observed(schedule, slot_text(slot)) as settled:
        return settled(_enqueue_slot(schedule, slot))


def _enqueue_slot(schedule: Schedule, slot: datetime) -> str:
    key = schedule.task_key(slot_text(slot))
    target: Any = schedule.target
    if schedule.kind == "claimed":
        return "enqueued" if target.enqueue(key, schedule.task) is not None else "coalesced"
    if schedule.kind == "django":
        if target.window_seconds is not None:
            target = target.using(key=key)
        target.enqueue(*schedule.args, **schedule.kwargs)
        return "enqueued"
    schedule.target()
    return "ran"


def _log_failure(what: str, error: BaseException) -> None:
    logger.warning(
        "%s failed: %s: %s",
        *(what, type(error).__name__, printable(str(error))),
        exc_info=error,
        extra={"event": "schedule.failed"},
    )
