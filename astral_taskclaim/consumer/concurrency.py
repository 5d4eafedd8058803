"""Internal: per-group concurrency limits, the consumer's side.

A claimed task with ``concurrency_limit=N`` runs at most N messages of
each group at once, in every process: a run first takes one of its
group's N slots, rows of ``taskclaim.claim`` keyed
``"taskclaim-slot:<group>:<i>"`` and held by the message's claim token
(``taskclaim/slot_take.sql``); it frees the slot once its attempt is over,
whatever its outcome (``taskclaim/slot_release.sql``). A slot lasts
:func:`slot_seconds` from when it is taken; the worker keeps the slots of
the messages it runs from ending (:func:`held_slots`, written by
``taskclaim/keep.sql`` with their claims), so a slot outlives its length
only while its run lives, and a dead worker's slot frees at most that long
after its last beat.

A message that finds every slot of its group held is sent again, not
counted as an attempt, due when the group's earliest slot would end
(at least :data:`_SHORTEST_WAIT` from now), its claim held through the
wait; it logs ``queue.concurrency_limited`` (DEBUG) and counts in
``ConsumeSummary.concurrency_limited``. On a PostgreSQL queue in the
claims' database a freed slot wakes at once the group's oldest waiting
message (and a message just sent to wait looks once more, for a slot
freed meanwhile), so a slot rarely stays free while one of its group waits.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Awaitable, Callable, Generator, Iterable
from typing import Any, NamedTuple

from astral_taskclaim.consumer import failures
from astral_taskclaim.consumer.deferral import send_again
from astral_taskclaim.consumer.failures import TimeLimitExceeded
from astral_taskclaim.consumer.summary import (
    ConcurrencyLimit,
    ConsumeSummary,
    Decision,
    Message,
    Outcome,
    TaskOptions,
)
from astral_taskclaim.core.envelope import Envelope
from astral_taskclaim.core.logtext import printable
from astral_taskclaim.core.validation import validate_concurrency_limit, validate_key
from astral_taskclaim.db import statements
from astral_taskclaim.queues import queues
from astral_taskclaim.queues.postgres import PostgresQueue

logger = logging.getLogger(__name__)

#: What every slot key starts with: keys of this form are the slots' own.
SLOT_PREFIX = "taskclaim-slot:"
#: The body field naming a waiting message's group, so a freed slot finds it.
GROUP_FIELD = "concurrencyGroup"
#: The longest a slot lasts unkept: a dead worker's slot frees within it.
_LONGEST_SLOT = 60.0
#: The shortest wait of a message for a slot of its group.
_SHORTEST_WAIT = 0.1

#: The slots this process's runs hold: slot key → (token, seconds).
_held: dict[str, tuple[str, float]] = {}
_held_lock = threading.Lock()


class _Slot(NamedTuple):
    """A slot a run holds (``key``; ``None``: none), the run's token, its
    group and the group's slot keys."""

    key: str | None
    token: str
    group: str
    keys: list[str]


def limit_of(
    limit: object, group: Callable[[Any], object] | None, *, default: str
) -> ConcurrencyLimit | None:
    """A task's ``concurrency_limit`` and ``concurrency_group`` (checked;
    ``default``: the group when none is given), or ``None`` without a limit."""
    checked = validate_concurrency_limit(limit, group)
    if checked is None:
        return None
    return ConcurrencyLimit(checked, group or default)


def slot_seconds(window_seconds: float) -> float:
    """How long a run's slot lasts unkept: its window, at most a minute."""
    return min(float(window_seconds), _LONGEST_SLOT)


def held_slots(tokens: Iterable[str]) -> list[tuple[str, str, float]]:
    """The slots this process holds for runs of claim ``tokens``:
    (key, token, seconds) each, for the worker to keep."""
    wanted = set(tokens)
    with _held_lock:
        return [(key, token, s) for key, (token, s) in _held.items() if token in wanted]


def take(
    consumer: Any, options: TaskOptions, found: Envelope, message: Message, summary: ConsumeSummary
) -> _Slot | Outcome | None:
    """A slot of the run's group (``None``: no limit, or a task that does
    not parse, which the run reports), or the outcome once the message is
    settled without a run: sent again to wait, or acked for a group that
    cannot be told."""
    limit = options.concurrency
    if limit is None:
        return None
    try:
        task = options.parse(found.task)
    except BaseException as error:
        if not failures.is_task_failure(error):
            raise
        return None
    if task is None:
        return None
    group = _group_of(consumer, limit, task, found, message, summary)
    if group is None:
        return "unparseable"
    alias, seconds = consumer.alias, slot_seconds(found.window_seconds)
    keys = [f"{SLOT_PREFIX}{group}:{i}" for i in range(limit.limit)]
    params = {"keys": keys, "token": found.claim, "seconds": seconds}
    earliest = None
    for _ in range(limit.limit):  # a slot a concurrent taker won: look again
        [(key, looked_free, earliest)] = statements.run(alias, "taskclaim/slot_take.sql", params)
        if key is not None:
            with _held_lock:
                _held[key] = (found.claim, seconds)
            return _Slot(key, found.claim, group, keys)
        if not looked_free:
            break
    _wait(consumer, found, message, summary, group, earliest)
    # A slot freed while this message was being sent found no one to wake.
    _free(alias, summary.queue, _Slot(None, found.claim, group, keys))
    return "retried"


def holding(
    alias: str,
    queue: str,
    slot: _Slot | None,
    attempt: Generator[Awaitable[object], object, Decision],
) -> Generator[Awaitable[object], object, Decision]:
    """Runs ``attempt`` (the run of a message), then frees ``slot``. A sync
    run left running past its time limit does not free it: its slot runs
    out unkept, while its worker exits for a restart and ends the run."""
    if slot is None:
        return (yield from attempt)
    decision = None
    try:
        decision = yield from attempt
        return decision
    finally:
        error = getattr(decision, "exception", None)
        if isinstance(error, TimeLimitExceeded) and error.hung:
            with _held_lock:
                _held.pop(slot.key or "", None)
        else:
            _free(alias, queue, slot)


def _free(alias: str, queue: str, slot: _Slot) -> None:
    """Frees ``slot`` (if it has a key) and, on a PostgreSQL queue in
    database ``alias``, wakes the group's oldest waiting message if a slot
    of the group is free (``taskclaim/slot_release.sql``)."""
    with _held_lock:
        _held.pop(slot.key or "", None)
    backend = queues[queue]
    name = None
    if isinstance(backend, PostgresQueue) and backend.database == alias:
        name = backend.queue_name  # only it can bring a waiting message forward
    if slot.key is None and name is None:
        return
    params = {**slot._asdict(), "queue": name}
    try:
        statements.run(alias, "taskclaim/slot_release.sql", params)
    except Exception:  # the slot ends unkept, a waiting message comes when due
        logger.warning(
            "%s: concurrency group %s: freeing slot %s or waking a waiting message failed",
            *(printable(queue), printable(slot.group), printable(slot.key)),
            exc_info=True,
            extra={"event": "queue.concurrency_release_failed", "queue": queue, "key": slot.key},
        )


def _group_name(limit: ConcurrencyLimit, task: Any) -> str:
    """The group of a run of ``task`` (parsed) under ``limit``; what the
    ``concurrency_group`` function raised, or ``TypeError``/``ValueError``
    when it gave what no slot key can hold (not a non-empty ``str``)."""
    if isinstance(limit.group, str):
        return limit.group
    group = limit.group(task)
    if not isinstance(group, str):
        raise TypeError(f"concurrency_group returned {type(group).__name__}, not str")
    if not group:
        raise ValueError("concurrency_group returned an empty str")
    validate_key(f"{SLOT_PREFIX}{group}:{limit.limit}", name="the slot key of the group")
    return group


def check_group(
    limit: ConcurrencyLimit | None, parse: Callable[[Any], Any], task: Any, *, owner: str
) -> None:
    """``ValueError`` naming ``owner`` (a claimed task) when its
    ``concurrency_group`` cannot tell the group of ``task``, which the
    worker would ack unrun: refused at enqueue. A task that is not JSON or
    does not ``parse`` is left to the enqueue and the run, which report it."""
    if limit is None or isinstance(limit.group, str):
        return
    try:
        parsed = parse(json.loads(json.dumps(task)))  # what the run parses
    except Exception:
        return
    if parsed is None:
        return
    try:
        _group_name(limit, parsed)
    except Exception as error:
        raise ValueError(
            f"{owner}: its concurrency_group cannot tell this task's group "
            f"({failures.describe_error(error)}); nothing was enqueued"
        ) from error


def _group_of(
    consumer: Any,
    limit: ConcurrencyLimit,
    task: Any,
    found: Envelope,
    message: Message,
    summary: ConsumeSummary,
) -> str | None:
    """The run's group, or ``None`` once the message is acked (its claim
    released) because its group cannot be told: the ``concurrency_group``
    function raised, or gave what no slot key can hold."""
    queue = summary.queue
    try:
        group = _group_name(limit, task)
    except Exception as error:
        logger.error(
            "%s task %s: its concurrency group cannot be told (%s); claim released, acked",
            *(printable(queue), printable(found.key), printable(error)),
            exc_info=True,
            extra={"event": "queue.concurrency_group_failed", "queue": queue, "key": found.key},
        )
        consumer.write_claim(queue, found, summary, True, 0)
        message.ack()
        summary.unparseable += 1
        return None
    return group


def _wait(
    consumer: Any,
    found: Envelope,
    message: Message,
    summary: ConsumeSummary,
    group: str,
    earliest: float | None,
) -> None:
    """Sends the message again for when a slot of ``group`` may free,
    holding its claim meanwhile (a trigger then coalesces into it)."""
    queue = summary.queue
    wait = max(earliest or 0.0, _SHORTEST_WAIT)
    consumer.write_claim(queue, found, summary, False, wait)
    send_again(queue, message, wait, {**message.body, GROUP_FIELD: group})
    logger.debug(
        "%s task %s: concurrency group %s is at its limit; waits %.1f s",
        *(printable(queue), printable(found.key), printable(group), wait),
        extra={
            "event": "queue.concurrency_limited",
            "queue": queue,
            "key": found.key,
            "group": group,
        },
    )
    summary.retried += 1
    summary.concurrency_limited += 1
    summary.retry_delays.append(wait)
