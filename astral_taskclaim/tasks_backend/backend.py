"""``ClaimTaskBackend``: Django's Tasks framework on the app's queues.

::

    TASKS = {
        "default": {
            "BACKEND": "astral_taskclaim.tasks_backend.ClaimTaskBackend",
            "QUEUES": ["default", "mail"],
            "OPTIONS": {
                "queue": "tasks",
                "queues": {"mail": "mail"},
                "max_retries": 3,
                "time_limit": 600,
            },
        },
    }

Options: ``queue`` (the ``TASKCLAIM_QUEUES`` alias carrying the runs,
default ``"default"``), ``queues`` (a Task ``queue_name`` → alias mapping for
names that go elsewhere), ``max_retries`` (retries after a failed attempt,
default 3, with the app's backoff), ``time_limit`` (seconds a run may take,
past which its attempt fails; default ``None``: the queue's ``TIME_LIMIT``,
see :mod:`~astral_taskclaim.consumer.time_limits`). ``manage.py consume_claimed ALIAS``
runs them. Results are stored in ``taskclaim.task_result`` in
``TASKCLAIM_DATABASE``, whatever the queue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, transaction

from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.claims.writing import async_write_alias, in_transaction
from astral_taskclaim.core.tracing import sending
from astral_taskclaim.core.validation import (
    Debounce,
    Trailing,
    raise_misconfigured,
    validate_alias,
    validate_max_retries,
    validate_time_limit,
)
from astral_taskclaim.db import statements
from astral_taskclaim.queues import BaseQueue, check_queue, queues
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks_backend import async_enqueue, results
from astral_taskclaim.tasks_backend.compat import (
    BaseTaskBackend,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
)
from astral_taskclaim.tasks_backend.sending import (
    ENQUEUE_TRIES,
    RecordingSender,
    RunRequest,
    enqueue_trailing_run,
    json_arguments,
)
from astral_taskclaim.tasks_backend.task import (
    ClaimTask,
    coalescing_key,
    trailing_mode,
    validate_options,
)

OPTIONS = frozenset({"queue", "queues", "max_retries", "time_limit"})
DEFAULT_MAX_RETRIES = 3


def _in_claims_database(queue: BaseQueue, database: str) -> PostgresQueue | None:
    """``queue`` if it is a stock PostgreSQL queue in ``database``, where
    claim, message and result row can be one statement; else ``None``."""
    if isinstance(queue, PostgresQueue) and queue.claimed_insert(database) is not None:
        return queue
    return None


@dataclass(frozen=True)
class BackendOptions:
    """A backend's ``OPTIONS``, read without making the backend (the
    worker's runners are set from them): each problem a message of E033,
    its value replaced by the default."""

    queue: str
    queues: dict[str, str]
    max_retries: int
    time_limit: float | None
    problems: tuple[str, ...]

    @classmethod
    def read(cls, options: Mapping[str, Any]) -> BackendOptions:
        problems: list[str] = []

        def valid(check: Callable[..., Any], value: object, name: str, default: Any) -> Any:
            try:
                return check(value, name=f"OPTIONS{name}")
            except (TypeError, ValueError) as error:
                problems.append(str(error))
                return default

        queue = valid(validate_alias, options.get("queue", "default"), "['queue']", "default")
        mapping = options.get("queues", {})
        if not isinstance(mapping, dict):
            problems.append(f"OPTIONS['queues'] must be a dict, got {type(mapping).__name__}")
            mapping = {}
        aliases = {
            str(name): valid(validate_alias, to, f"['queues'][{name!r}]", "default")
            for name, to in mapping.items()
        }
        retries = options.get("max_retries", DEFAULT_MAX_RETRIES)
        retries = valid(validate_max_retries, retries, "['max_retries']", DEFAULT_MAX_RETRIES)
        limit = valid(validate_time_limit, options.get("time_limit"), "['time_limit']", None)
        problems += [
            f"unknown option {name!r}; known: {', '.join(sorted(OPTIONS))}"
            for name in sorted(set(options) - OPTIONS)
        ]
        return cls(queue, aliases, retries, limit, tuple(problems))

    @property
    def carrying(self) -> list[str]:
        """The queue aliases the backend's runs go to."""
        return sorted({self.queue, *self.queues.values()})


class ClaimTaskBackend(BaseTaskBackend):  # type: ignore[misc]
    """Runs Django Tasks through the app's queues (see the module docstring).

    Flags: ``supports_defer``, ``supports_async_task`` and
    ``supports_get_result`` always; ``supports_priority`` when every queue
    it sends to is a PostgreSQL queue in ``TASKCLAIM_DATABASE`` (remote
    queues deliver in their own order, so a priority is refused there).
    """

    task_class = ClaimTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        read = BackendOptions.read(self.options)
        self.problems: list[checks.CheckMessage] = [
            checks.Error(f"TASKS[{alias!r}]: {text}", id="astral_taskclaim.E033")
            for text in read.problems
        ]
        self.queue_alias = read.queue
        self.queue_aliases = read.queues
        self.max_retries = read.max_retries
        self.supports_priority = all(self._in_database(a) for a in read.carrying)
        self._carrying_aliases = read.carrying

    def _in_database(self, queue_alias: str) -> bool:
        try:
            queue = queues[queue_alias]
        except ImproperlyConfigured:
            return False
        return _in_claims_database(queue, statements.configured_alias()) is not None

    def queue_for(self, queue_name: str) -> str:
        """The ``TASKCLAIM_QUEUES`` alias carrying Tasks of ``queue_name``."""
        return self.queue_aliases.get(queue_name, self.queue_alias)

    def validate_task(self, task: Any) -> None:
        """Django's checks, then the app's options and a ``run_after`` the
        run's row can be read back with (``InvalidTask``)."""
        super().validate_task(task)
        validate_options(task)
        results.check_run_after(task)
        results.remember(task)

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        """The backend's option errors (E033) and its queues' system checks."""
        messages = list(self.problems)
        for queue_alias in self._carrying_aliases:
            messages.extend(check_queue(queue_alias))
        return messages

    def _run_request(self, task: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> RunRequest:
        """The run to enqueue, once the task, the options and the arguments
        passed their checks (nothing is written before)."""
        self.validate_task(task)
        raise_misconfigured(f"TASKS[{self.alias!r}]", self.problems)
        args, kwargs = json_arguments(task, args, kwargs)
        request = RunRequest(
            task=task,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            queue=self.queue_for(task.queue_name),
        )
        request.key = coalescing_key(task, request.args, request.kwargs)
        return request

    def enqueue(self, task: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """Queues one run of ``task`` and returns its ``TaskResult``; for a
        coalescing task whose key is claimed, queues nothing and returns the
        claiming run's result instead (its id is the claim token). With
        ``trailing``, the result of the run that carries this call: new if
        sent now or the key's new follow-up run, else the pending follow-up's."""
        request = self._run_request(task, args, kwargs)
        queue = queues[request.queue]
        database = statements.configured_alias()
        if (mode := trailing_mode(task)) is not None:
            return self._enqueue_trailing(queue, database, request, mode)
        in_database = _in_claims_database(queue, database)
        if in_database is not None:
            enqueued_at, holder = self._enqueue_in_database(in_database, database, request)
        else:
            enqueued_at, holder = self._enqueue_elsewhere(queue, database, request)
        if holder is not None:
            return self._holder_result(database, holder, request)
        result = self._new_result(request, enqueued_at)
        task_enqueued.send(type(self), task_result=result)
        return result

    async def aenqueue(self, task: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """:meth:`enqueue` for async code, with the same checks and results,
        its statements run natively on the event loop
        (:mod:`~astral_taskclaim.claims.async_api`'s connections): on the PostgreSQL
        queue, claim, message and result row in one statement.

        It commits on its own, so inside ``transaction.atomic()`` it raises
        ``TransactionManagementError``: call :meth:`enqueue` there (through
        ``sync_to_async``) to commit the run with the block."""
        request = self._run_request(task, args, kwargs)
        queue = queues[request.queue]
        database = async_write_alias(None, "aenqueue")
        if (mode := trailing_mode(task)) is not None:  # in a thread, as aenqueue_claimed's
            enqueue = sync_to_async(self._enqueue_trailing)
            return await asyncio.shield(enqueue(queue, database, request, mode))
        in_database = _in_claims_database(queue, database)
        if in_database is not None:
            enqueued_at, holder = await async_enqueue.aenqueue_in_database(
                in_database, database, request
            )
        else:
            enqueued_at, holder = await async_enqueue.aenqueue_elsewhere(queue, database, request)
        if holder is not None:
            try:
                return results.to_task_result(await results.afetch(database, holder))
            except TaskResultDoesNotExist:
                return self._unrecorded_holder(holder, request)
        result = self._new_result(request, enqueued_at)
        await task_enqueued.asend(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> Any:
        """The stored run ``result_id``, from any process (``TaskResultDoesNotExist``)."""
        return results.to_task_result(results.fetch(statements.configured_alias(), result_id))

    async def aget_result(self, result_id: str) -> Any:
        """:meth:`get_result` for async code, read natively on the event loop."""
        row = await results.afetch(statements.configured_alias(), result_id)
        return results.to_task_result(row)

    def _enqueue_in_database(
        self, queue: PostgresQueue, database: str, request: RunRequest
    ) -> tuple[datetime | None, str | None]:
        """Claim, message and result row in one statement (joining the
        caller's transaction, in a savepoint)."""
        with sending(queue, request.envelope_key, request.task.module_path):
            for _ in range(ENQUEUE_TRIES):
                params = request.in_database_params(queue)
                with _savepoint_if_in_transaction(database):
                    [(enqueued_at, holder)] = statements.run(database, "tasks/enqueue.sql", params)
                if enqueued_at is not None or holder is not None:
                    return enqueued_at, holder
        raise request.changing_hands(request.envelope_key)

    def _enqueue_elsewhere(
        self, queue: BaseQueue, database: str, request: RunRequest
    ) -> tuple[datetime | None, str | None]:
        """Through ``enqueue_claimed``: claim, then result row and message."""
        if in_transaction(connections[database]) and not queue.transactional:
            raise transaction.TransactionManagementError(
                f"{request.task.module_path}.enqueue() on queue {request.queue!r} cannot run "
                "inside a transaction: its message would be sent before the commit. Call "
                "transaction.on_commit(lambda: task.enqueue(...)) instead."
            )
        sender = RecordingSender(queue, database, request)
        key = request.envelope_key
        token = enqueue_claimed(
            sender, key, request.payload, window_seconds=request.claim_window(), using=database
        )
        if token is not None:
            request.token = token
            return sender.enqueued_at, None
        holder = statements.run(database, "tasks/holder.sql", {"key": key})
        if holder:
            return None, holder[0][0]
        raise request.changing_hands(key)

    def _enqueue_trailing(
        self, queue: BaseQueue, database: str, request: RunRequest, mode: Trailing | Debounce
    ) -> Any:
        enqueued, enqueued_at = enqueue_trailing_run(queue, database, request, mode)
        if enqueued.outcome == "merged":
            return self._holder_result(database, str(enqueued), request)
        result = self._new_result(request, enqueued_at)
        task_enqueued.send(type(self), task_result=result)
        return result

    def _new_result(self, request: RunRequest, enqueued_at: datetime | None) -> Any:
        payload = (request.args, request.kwargs)
        return results.run_result(
            request.task,
            request.token,
            TaskResultStatus.READY,
            payload,
            backend=self.alias,
            enqueued_at=enqueued_at,
        )

    def _holder_result(self, database: str, holder: str, request: RunRequest) -> Any:
        """The result of the run holding the key; a run not recorded here
        (a claimed task's, or a result deleted since) reads as ready."""
        try:
            return results.to_task_result(results.fetch(database, holder))
        except TaskResultDoesNotExist:
            return self._unrecorded_holder(holder, request)

    def _unrecorded_holder(self, holder: str, request: RunRequest) -> Any:
        request.token = holder
        return self._new_result(request, None)


def _savepoint_if_in_transaction(database: str) -> Any:
    if in_transaction(connections[database]):
        return transaction.atomic(using=database)
    return nullcontext()
