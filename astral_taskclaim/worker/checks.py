"""Internal: system checks of what the workers consume (registered by
:mod:`astral_taskclaim.checks`): W034 and W035, a queue several claimed tasks
share that a TypeScript worker can reach; W036, a PostgreSQL queue holding
messages that no worker of this project would consume; W037, one holding
messages for a task none of its workers has (:func:`unknown_tasks`, which
``manage.py taskclaim_status`` reads too).

A queue of several tasks names each message's task in ``"taskName"``
(:mod:`astral_taskclaim.consumer.dispatch`): only a TypeScript worker would
ignore the field or send bodies without it, and only a remote queue
(Cloudflare, SQS) is one a TypeScript worker can reach; the TypeScript
package has no PostgreSQL queue."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.utils.module_loading import import_string

from astral_taskclaim.consumer.consume import Consumer
from astral_taskclaim.core.checks import CHECK_ID, configured_queues
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.logtext import counted
from astral_taskclaim.queues import create_queue
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.queues.remote import RemoteQueue
from astral_taskclaim.tasks import registry


@checks.register(checks.Tags.database)
def check_unconsumed_queues(
    databases: Sequence[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """W036 for a PostgreSQL queue holding messages that no registered task
    consumes: its workers would stop at start, the messages wait forever."""
    messages: list[checks.CheckMessage] = []
    for alias, queue in _postgres_queues(databases or ()):
        try:
            registry.get(alias)
            continue
        except LookupError:
            pass
        try:
            status = queue.status()
        except DatabaseError:
            continue  # W007 or W030 says why
        held = (status.ready or 0) + (status.delayed or 0) + (status.leased or 0)
        if held:
            messages.append(
                checks.Warning(
                    f"queue {alias!r} holds {counted(held, 'message')}, but no claimed task "
                    "of this project consumes it: messages wait until one is registered.",
                    hint="Claimed tasks are registered when their module is imported: each "
                    "installed app's tasks.py is, at start-up; import a task declared "
                    "elsewhere (say jobs.py) from there.",
                    obj=alias,
                    id=CHECK_ID.format("W036"),
                )
            )
    return messages


def _reachable_from_typescript(alias: str) -> bool:
    """Whether queue ``alias`` is one a TypeScript worker can send to or
    consume: a remote one (Cloudflare, SQS). The TypeScript package has no
    PostgreSQL queue; this app's queue table is for its own workers only."""
    config = (configured_queues() or {}).get(alias)
    path = config.get("BACKEND") if isinstance(config, dict) else None
    try:
        backend = import_string(path) if isinstance(path, str) else None
    except ImportError:
        return False  # E010 or E031 says why
    return isinstance(backend, type) and issubclass(backend, RemoteQueue)


@checks.register()
def check_shared_queues(**kwargs: Any) -> list[checks.CheckMessage]:
    """W034 and W035 for each remote queue with several claimed tasks: only
    a queue a TypeScript worker can reach may see a consumer that ignores
    ``taskName`` or bodies that name no task."""
    found: list[checks.CheckMessage] = []
    for queue in sorted({task.queue for task in registry}):
        tasks = registry.tasks_of(queue)
        if len(tasks) < 2 or not _reachable_from_typescript(queue):
            continue
        names = ", ".join(task.name for task in tasks)
        found.append(
            checks.Warning(
                f"queue {queue!r} carries {len(tasks)} claimed tasks ({names}): its messages "
                "name their task in a field a TypeScript consumer ignores, so one would run "
                "its own task on every message",
                hint=f"Give each task its own queue, or consume {queue!r} with Python workers "
                'only; where no TypeScript consumer reads it, add "astral_taskclaim.W034" to '
                "SILENCED_SYSTEM_CHECKS.",
                obj=queue,
                id=CHECK_ID.format("W034"),
            )
        )
        if not any(task.default for task in tasks):
            found.append(
                checks.Warning(
                    f"queue {queue!r} carries {len(tasks)} claimed tasks ({names}) and no "
                    "default: no task runs a message naming none (a TypeScript producer's), "
                    "which is given up in the end",
                    hint=f"Declare one of {names} @claimed_task(default=True) to run the "
                    "bodies that name no task; or have the TypeScript producer add "
                    '"taskName" (one of them) after the four fields of each body; where only '
                    f"this project sends to {queue!r} (its bodies name their task), add "
                    '"astral_taskclaim.W035" to SILENCED_SYSTEM_CHECKS.',
                    obj=queue,
                    id=CHECK_ID.format("W035"),
                )
            )
    return found


def unknown_task_counts() -> dict[str, list[dict[str, Any]]]:
    """Per PostgreSQL queue of ``TASKCLAIM_QUEUES`` that claimed tasks use:
    ``[{"task": name, "messages": count}]`` of :func:`unknown_tasks`; a
    queue that cannot be asked is left out (its status says why)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for alias, queue in _postgres_queues(None):
        try:
            if registry.tasks_of(alias):
                counts = unknown_tasks(queue)
                found[alias] = [{"task": name, "messages": count} for name, count in counts]
        except DatabaseError:
            continue
        finally:
            queue.close()
    return found


def unknown_tasks(queue: PostgresQueue) -> list[tuple[object, int]]:
    """The task names (``None``: none) that messages of ``queue`` give and
    no registered claimed task of it has, with how many messages give each;
    ``[]`` for a queue of no claimed task (W036's, or a Django Tasks
    runner's, whose messages name no claimed task)."""
    tasks = registry.tasks_of(queue.alias)
    if not tasks:
        return []
    known = Consumer(queue.alias, tasks)
    return [(name, count) for name, count in queue.task_names() if not known.knows(name)]


@checks.register(checks.Tags.database)
def check_unknown_tasks(
    databases: Sequence[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """W037 for each task name that messages of a PostgreSQL queue give and
    no installed module registers: they wait for a worker that has it."""
    messages: list[checks.CheckMessage] = []
    for alias, queue in _postgres_queues(databases or ()):
        try:
            found = unknown_tasks(queue)
        except DatabaseError:
            continue  # W007 or W030 says why
        for name, count in found:
            if name is None:  # sent while the queue had one task, or by TypeScript
                names = ", ".join(task.name for task in registry.tasks_of(alias))
                what = f"naming no task, and none of its tasks ({names}) is declared default=True"
                hint = (
                    "Declare default=True on the task these messages are for (the one "
                    "the queue carried before it gained another), or have the producer "
                    'add "taskName".'
                )
            else:
                what = f"naming {name!r}, a task no installed module registers for it"
                hint = (
                    "Deploy the code that declares it (import a task declared outside "
                    "tasks.py from there), or correct the producer that names it."
                )
            messages.append(
                checks.Warning(
                    f"queue {alias!r} holds {counted(count, 'message')} {what}: such "
                    "messages wait for a worker that has it, then are given up an hour after "
                    "a worker first found it unknown.",
                    hint=hint,
                    obj=alias,
                    id=CHECK_ID.format("W037"),
                )
            )
    return messages


def _postgres_queues(databases: Sequence[str] | None) -> Iterator[tuple[str, PostgresQueue]]:
    """The PostgreSQL queues of ``TASKCLAIM_QUEUES`` by alias, those in
    ``databases`` only unless it is ``None``; a queue that cannot be made is
    left out (E006 and E010 to E014 say why)."""
    try:
        aliases = list(app_settings.QUEUES)
    except ImproperlyConfigured:
        return
    for alias in aliases:
        try:
            queue = create_queue(alias)
        except ImproperlyConfigured:
            continue
        if isinstance(queue, PostgresQueue) and (databases is None or queue.database in databases):
            yield alias, queue
