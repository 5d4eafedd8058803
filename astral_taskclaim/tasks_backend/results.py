"""Reading and writing runs in ``taskclaim.task_result``.

Writes are single prepared statements (``tasks/*.sql``) on the claims
database, like the claims' own; reads go through the
:class:`~.models.StoredTaskResult` model. A stored row becomes Django's
``TaskResult`` through :func:`to_task_result`.
"""

from __future__ import annotations

import json
import traceback
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import psycopg
from django.db import DataError, connections
from django.utils.module_loading import import_string

from astral_taskclaim.consumer.failures import TaskNotFound, describe_error
from astral_taskclaim.core.logtext import storable
from astral_taskclaim.db import statements
from astral_taskclaim.db.aio_pool import run
from astral_taskclaim.queues.runs import worker_id
from astral_taskclaim.tasks_backend.compat import (
    InvalidTask,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    set_return_value,
)
from astral_taskclaim.tasks_backend.models import StoredTaskResult

#: The columns ``tasks/result.sql`` selects, in order.
_RESULT_COLUMNS = (
    "id",
    "task_path",
    "backend",
    "queue_name",
    "queue",
    "priority",
    "run_after",
    "key",
    "status",
    "args",
    "kwargs",
    "return_value",
    "errors",
    "worker_ids",
    "enqueued_at",
    "started_at",
    "last_attempted_at",
    "finished_at",
)


def compact_json(value: Any) -> str:
    """``value`` as JSON text for a ``jsonb`` parameter."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


#: The times a run's row may hold and be read back: from the first up to,
#: not including, the second. ``LoadableDateTimeField`` clamps what Python
#: cannot load into years 1 and 9999, so a time there may be a clamped one:
#: refused when read (:func:`to_task_result`), and as a ``run_after``.
_READABLE = (datetime(2, 1, 1, tzinfo=UTC), datetime(9999, 1, 1, tzinfo=UTC))
_READABLE_TEXT = f"from {_READABLE[0].isoformat()} to before {_READABLE[1].isoformat()}"


def _readable(value: datetime) -> bool:
    earliest, end = _READABLE
    if value.utcoffset() is None:  # naive (USE_TZ = False), as Django loads it then
        earliest, end = earliest.replace(tzinfo=None), end.replace(tzinfo=None)
    return earliest <= value < end


def check_run_after(task: Any) -> None:
    """``InvalidTask`` for a ``run_after`` its run could not be read back with."""
    if task.run_after is not None and not _readable(task.run_after):
        raise InvalidTask(
            f"{task.module_path}: run_after must be {_READABLE_TEXT} (the times a "
            f"stored run can be read back with), got {task.run_after.isoformat()}"
        )


def error_of(exception: BaseException) -> TaskError:
    """Django's ``TaskError`` for ``exception``: class path and traceback,
    made storable (a NUL or a lone surrogate in the message is escaped)."""
    kind = type(exception)
    return TaskError(
        exception_class_path=f"{kind.__module__}.{kind.__qualname__}",
        traceback=storable("".join(traceback.format_exception(exception))),
    )


#: The Tasks of this backend class made in this process (``@task`` checks
#: each with ``validate_task``), by dotted path: the first, the decorated one.
_known_tasks: dict[str, Any] = {}


def remember(task: Any) -> None:
    """Registers a Task the backend validated, so a worker finds it by its
    path without importing anything a message names."""
    _known_tasks.setdefault(task.module_path, task)


def load_task(path: str) -> Any:
    """The Task at dotted ``path``, registered or else imported;
    :class:`~astral_taskclaim.consumer.failures.TaskNotFound` (a ``LookupError``)
    naming it otherwise. Only for a path the app wrote (a stored run's),
    never one only a message names: importing runs the module's code."""
    task = _known_tasks.get(path)
    if task is not None:
        return task
    try:
        task = import_string(path)
    except Exception as error:  # ".x" raises ValueError; a module may raise anything
        raise TaskNotFound(f"task {path!r} cannot be imported: {describe_error(error)}") from error
    if not isinstance(task, Task):
        raise TaskNotFound(f"{path!r} is not a Task (is it decorated with @task?)")
    return task


def _relaxed(database: str) -> bool:
    """Whether a run's state may commit without waiting for its WAL flush:
    in autocommit, where the statement is its own transaction. The worker
    settles the run's message afterwards, and that commit flushes the WAL
    up to it, so a run's state is durable before its message is gone; a
    server crash in between loses at most the latest state of the runs in
    flight, whose messages are delivered again (at least once, as ever).
    Inside a transaction the setting would hold to the caller's commit, so
    it is never relaxed there; nor, in the statements, while the server has
    a synchronous standby (``synchronous_standby_names``): after a failover
    the worker's retried settlement lands on the promoted standby, which
    may have the message's lease but not a state committed unflushed just
    before the old primary died, and the run would stay ``RUNNING``."""
    return connections[database].get_autocommit()


def start(database: str, result_id: str, payload: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """Starts an attempt of the run whose message task is ``payload``:
    ``(status, enqueued_at, started_at, last_attempted_at, worker_ids)``, or
    ``None`` for a run that finished (or was cancelled, or deleted) and must
    not run again, or whose stored task path and arguments are not the
    message's (see :func:`refusal`)."""
    params = {
        "id": result_id,
        "task_path": payload["taskPath"],
        "args": compact_json(payload["args"]),
        "kwargs": compact_json(payload["kwargs"]),
        "worker_id": worker_id(),
        "relaxed": _relaxed(database),
    }
    rows = statements.run(database, "tasks/start.sql", params)
    if not rows:
        return None
    *times, worker_ids = rows[0]
    # Django's connections load jsonb as text, for the ORM to decode.
    return (*times, json.loads(worker_ids) if isinstance(worker_ids, str) else worker_ids)


def refusal(database: str, result_id: str, payload: Mapping[str, Any]) -> str | None:
    """Why a message with task ``payload`` for run ``result_id`` did not
    start: no such run, or one of another task or arguments (a forged
    message: the stored run is what runs); ``None`` when it finished."""
    fields = ("task_path", "args", "kwargs")
    row = StoredTaskResult.objects.using(database).filter(pk=result_id).values_list(*fields)
    found = row.first()
    if found is None:
        return f"no task result {result_id}"
    if found != (payload["taskPath"], payload["args"], payload["kwargs"]):
        return f"its task or arguments are not those of task result {result_id}"
    return None


def succeed(database: str, result_id: str, return_value: Any) -> datetime | None:
    """Records a successful run; its finish time (``None``: not running)."""
    params = {
        "id": result_id,
        "return_value": compact_json(return_value),
        "relaxed": _relaxed(database),
    }
    rows = statements.run(database, "tasks/succeed.sql", params)
    return rows[0][0] if rows else None


def fail(
    database: str, result_id: str, error: TaskError, *, final: bool, superseded_key: str = ""
) -> datetime | None:
    """Records a failed attempt; the finish time when ``final``. With
    ``superseded_key``, ends only a run of that key that never started and
    holds no claim of it (``tasks/supersede.sql``)."""
    params = {
        "id": result_id,
        "key": superseded_key,
        "exception_class_path": error.exception_class_path,
        "traceback": error.traceback,
        "final": final,
        "relaxed": _relaxed(database),
    }
    path = "tasks/supersede.sql" if superseded_key else "tasks/fail.sql"
    rows = statements.run(database, path, params)
    return rows[0][0] if rows else None


def fetch(database: str, result_id: object) -> StoredTaskResult:
    """The stored run ``result_id``; ``TaskResultDoesNotExist`` otherwise."""
    row = StoredTaskResult.objects.using(database).filter(pk=_uuid(result_id)).first()
    if row is None:
        raise TaskResultDoesNotExist(f"no task result {result_id!r}")
    return row


async def afetch(database: str, result_id: object) -> StoredTaskResult:
    """:func:`fetch` for async code, read on the event loop's own connection
    (:mod:`~astral_taskclaim.db.aio_pool`), which loads ``jsonb`` as Python
    values already."""
    try:
        rows = await run(database, "tasks/result.sql", {"id": _uuid(result_id)})
    except (
        DataError,
        psycopg.DataError,
    ) as error:  # a time Python cannot hold ('infinity', year 10000)
        raise TaskResultDoesNotExist(f"task result {result_id!r} cannot be read: {error}") from None
    if not rows:
        raise TaskResultDoesNotExist(f"no task result {result_id!r}")
    return StoredTaskResult.from_db(database, list(_RESULT_COLUMNS), rows[0])


def _uuid(result_id: object) -> uuid.UUID:
    try:
        return uuid.UUID(str(result_id))
    except ValueError:
        raise TaskResultDoesNotExist(f"no task result {result_id!r} (ids are UUIDs)") from None


def to_task_result(row: StoredTaskResult) -> Any:
    """Django's ``TaskResult`` for a stored run; its ``task`` is the Task at
    the stored path with the run's priority, queue, run_after and backend.
    A row no ``TaskResult`` can hold (written by hand or by another client:
    a time past Python's range, ``worker_ids`` that is no list of strings,
    an error that is no object of strings) is ``TaskResultDoesNotExist``."""
    problem = _odd(row)
    if problem is not None:
        raise TaskResultDoesNotExist(f"task result {row.pk} cannot be read: {problem}")
    try:
        base = load_task(row.task_path)
    except LookupError as error:
        raise TaskResultDoesNotExist(f"task result {row.pk}: {error}") from error
    task = replace(
        base,
        priority=row.priority,
        queue_name=row.queue_name,
        run_after=row.run_after,
        backend=row.backend,
    )
    result = TaskResult(
        task=task,
        id=str(row.pk),
        status=TaskResultStatus(row.status),
        enqueued_at=row.enqueued_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        last_attempted_at=row.last_attempted_at,
        args=row.args,
        kwargs=row.kwargs,
        backend=row.backend,
        errors=[
            TaskError(
                exception_class_path=error["exception_class_path"],
                traceback=error["traceback"],
            )
            for error in row.errors
        ],
        worker_ids=list(row.worker_ids),
    )
    if row.status == TaskResultStatus.SUCCESSFUL:
        set_return_value(result, row.return_value)
    return result


def _odd(row: StoredTaskResult) -> str | None:
    """What makes ``row`` no run Django can represent, or ``None``."""
    for name in ("run_after", "enqueued_at", "started_at", "last_attempted_at", "finished_at"):
        value = getattr(row, name)
        if value is not None and not _readable(value):
            return f"{name} is not {_READABLE_TEXT}"
    if not isinstance(row.worker_ids, list) or not all(isinstance(w, str) for w in row.worker_ids):
        return "worker_ids is not a list of strings"
    if not isinstance(row.errors, list) or not all(
        isinstance(error, dict)
        and isinstance(error.get("exception_class_path"), str)
        and isinstance(error.get("traceback"), str)
        for error in row.errors
    ):
        return "errors is not a list of error objects"
    if not isinstance(row.args, list) or not isinstance(row.kwargs, dict):
        return "args or kwargs is not a list and an object"
    if row.status not in {status.value for status in TaskResultStatus}:
        return f"status {row.status!r} is unknown"
    return None


def run_result(
    task: Any,
    result_id: str,
    status: Any,
    payload: tuple[list[Any], dict[str, Any]],
    *,
    backend: str,
    enqueued_at: datetime | None,
    started_at: datetime | None = None,
    last_attempted_at: datetime | None = None,
    finished_at: datetime | None = None,
    worker_ids: Sequence[str] = (),
) -> Any:
    """Django's ``TaskResult`` of a run of ``task`` with ``payload`` (args,
    kwargs) on ``backend`` that this process enqueued or ran, so knows
    without reading its row: no errors listed, no time it has not reached."""
    return TaskResult(
        task=task,
        id=result_id,
        status=status,
        args=payload[0],
        kwargs=payload[1],
        enqueued_at=enqueued_at,
        started_at=started_at,
        finished_at=finished_at,
        last_attempted_at=last_attempted_at,
        backend=backend,
        errors=[],
        worker_ids=list(worker_ids),
    )
