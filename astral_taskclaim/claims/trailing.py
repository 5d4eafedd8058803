"""Trailing runs: a trigger that finds its key claimed is never lost.

With ``trailing`` (``"latest"`` or ``"first"``), an enqueue that finds its
key claimed records the key's one pending follow-up run
(``taskclaim.follow_up``) instead of dropping the trigger, and the first
such trigger sends the follow-up's message, due when the claim ends
(``taskclaim/trail.sql``). Later triggers while the claim holds merge into
it, in one statement (``taskclaim/merge.sql``): in ``"latest"`` mode their
task replaces its task, in ``"first"`` mode nothing is written
(``taskclaim/merge_first.sql``).
The message's delivery claims the key for the follow-up's token and runs
its task, or waits again while a claim still holds the key
(``taskclaim/follow_up.sql``, :func:`take_follow_up`). A run sent at once
in this mode holds its key a window from its start (:func:`start_sent`), or is
superseded by a later claim of the key, so run starts of a key are at
least a window apart.

Statements and sends follow :func:`~astral_taskclaim.claims.writing.plan`:
a queue whose messages join the claims' database (PostgreSQL, an outbox)
writes trigger and message in one transaction; any other sends after the
commit, and a failed send undoes its claim or its new follow-up.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, Literal, Protocol

from django.db import DataError, connections, transaction

from astral_taskclaim.claims.writing import (
    discard_broken_connection,
    hold_params,
    log_claim_left,
    run_in_savepoint,
)
from astral_taskclaim.core.envelope import (
    FOLLOW_UP_FIELD,
    TRAILING_FIELD,
    Envelope,
    body_writer,
    message_body,
)
from astral_taskclaim.core.validation import Debounce, Trailing
from astral_taskclaim.db import statements
from astral_taskclaim.queues.base import BaseQueue

logger = logging.getLogger(__name__)

#: What an enqueue did with its trigger (:attr:`Enqueued.outcome`).
EnqueueOutcome = Literal["sent", "follow_up_created", "merged"]


class Enqueued(str):
    """The claim token of the run that carries a trigger (a ``str``, as
    every enqueue returns), with :attr:`outcome`: ``"sent"`` (claimed and
    sent now), ``"follow_up_created"`` (the key was claimed: a follow-up
    run is now pending for when the claim ends) or ``"merged"`` (a
    follow-up was already pending; it carries this trigger)."""

    __slots__ = ("outcome",)
    outcome: EnqueueOutcome

    def __new__(cls, token: str, outcome: EnqueueOutcome) -> Enqueued:
        made = super().__new__(cls, token)
        made.outcome = outcome
        return made

    def __repr__(self) -> str:
        return f"Enqueued({str(self)!r}, outcome={self.outcome!r})"


class _DelayingSender(Protocol):
    """What a trailing enqueue sends through: a configured queue, or a
    sender wrapping one (the Django Tasks backend's, which records a run)."""

    @property
    def max_send_delay_seconds(self) -> float: ...

    def send(self, body: Any, *, delay_seconds: float = 0) -> object: ...


def trailing_queue(queue: object) -> BaseQueue:
    """``queue``, which trailing runs need to be a configured queue (one that delays)."""
    if not isinstance(queue, BaseQueue):
        raise TypeError(f"trailing runs need a configured queue, got {type(queue).__name__}")
    return queue


def trailing_writer(queue: BaseQueue, window_seconds: float) -> Callable[..., str]:
    """A function writing the encoded body of ``(key, token, task,
    task_json, field)``: what :func:`enqueue_trailing` sends, ``field``
    (:data:`TRAILING_FIELD` or :data:`FOLLOW_UP_FIELD`) set, exactly as
    ``queue.encode`` writes it; with the stock ``encode``, put together from
    the task's JSON already made, its size checked as ``encode`` checks it."""
    if type(queue).encode is not BaseQueue.encode:

        def encode(key: str, token: str, task: Any, task_json: str, field: str) -> str:
            body = {**message_body(key, token, window_seconds, task), field: True}
            return queue.encode(body).decode("utf-8")

        return encode
    write = body_writer(window_seconds)

    def fast(key: str, token: str, task: Any, task_json: str, field: str) -> str:
        text = f'{write(key, token, task_json)[:-1]},"{field}":true}}'
        queue.check_body_size(len(text) if text.isascii() else len(text.encode("utf-8")))
        return text

    return fast


def enqueue_trailing(
    queue: _DelayingSender,
    key: str,
    task: Any,
    task_json: str,
    *,
    window_seconds: float,
    trailing: Trailing | Debounce,
    alias: str,
    joins: bool,
    merge_path: str | None = None,
) -> Enqueued:
    """The trailing-mode enqueue of ``enqueue_claimed`` (arguments checked,
    ``task_json`` encoded, the plan made: ``joins``). ``merge_path``: a
    statement including ``taskclaim/merge.sql`` that merges a trigger that
    writes, and writes more beside it; run again, in ``trail.sql``'s
    transaction, when that merged the trigger instead."""
    debounce = trailing if isinstance(trailing, Debounce) else None
    params = {
        "key": key,
        "task": task_json,
        "seconds": float(window_seconds),
        "latest": (debounce.keep if debounce else trailing) == "latest",
        "debounce": debounce and float(debounce.seconds),
        "max_wait": debounce and debounce.max_wait_seconds,
    }
    writes = params["latest"] or debounce
    merge = (merge_path or "taskclaim/merge.sql") if writes else "taskclaim/merge_first.sql"
    merged = run_in_savepoint(alias, merge, params)
    if merged:
        return Enqueued(merged[0][0], "merged")
    token = params["token"] = str(uuid.uuid4())
    with transaction.atomic(using=alias) if joins else nullcontext():
        [(outcome, carrier, wait)] = run_in_savepoint(alias, "taskclaim/trail.sql", params)
        if outcome == "merged":
            if writes and merge_path is not None:
                run_in_savepoint(alias, merge_path, params)
            return Enqueued(carrier, outcome)
        field = TRAILING_FIELD if outcome == "sent" else FOLLOW_UP_FIELD
        body = {**message_body(key, token, window_seconds, task), field: True}
        delay = min(max(wait or 0.0, 0.0), queue.max_send_delay_seconds)
        try:
            queue.send(body, delay_seconds=delay)
        except Exception:
            if not joins:
                _undo(queue, alias, key, token, outcome)
            raise
    return Enqueued(token, outcome)


def _undo(queue: _DelayingSender, alias: str, key: str, token: str, outcome: str) -> None:
    """Frees the claim, or drops the new follow-up, of a send that failed."""
    path = "taskclaim/release.sql" if outcome == "sent" else "taskclaim/follow_up_drop.sql"
    try:
        statements.run(alias, path, {"key": key, "token": token})
    except Exception:
        log_claim_left(logger, queue, key)
        discard_broken_connection(connections[alias])


def take_follow_up(alias: str, found: Envelope) -> Envelope | float | str | None:
    """A follow-up message's delivery: the envelope to run now (its key
    claimed for it, a fresh window from now), the seconds until the claim
    holding its key ends (deliver it again then), ``None`` when its
    follow-up is gone (superseded: nothing to run), or why it can never run
    (a window or debounce written by hand as NaN or infinite: the row is
    dropped)."""
    params = {"key": found.key, "token": found.claim}
    try:
        rows = statements.run(alias, "taskclaim/follow_up.sql", params)
    except DataError as error:
        statements.run(alias, "taskclaim/follow_up_drop.sql", params)
        return f"its follow-up cannot run ({error}); dropped"
    if not rows:
        return None
    task, window, wait = rows[0]
    if task is None:
        return max(float(wait), 0.0)
    try:
        parsed = json.loads(task)
    except ValueError:  # a row written by hand: the run's parse sees no task
        parsed = None
    return Envelope(found.key, found.claim, window, parsed)


def start_sent(alias: str, found: Envelope) -> bool:
    """Whether a trailing-mode message sent at once may run: its key is
    then held a window from now, its run's start. ``False`` when another
    token holds the key (a later claim, whose run carries this trigger)."""
    params = hold_params(found.key, found.claim, 0, found.window_seconds)
    return bool(statements.run(alias, "taskclaim/start.sql", params))
