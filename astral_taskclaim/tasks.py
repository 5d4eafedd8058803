"""Claimed tasks: a run function, the queue it is consumed from, and how.

In an installed app's ``tasks`` module (imported when Django starts)::

    from astral_taskclaim.tasks import claimed_task

    @claimed_task(queue="refresh", max_retries=3, window_seconds=300, time_limit=60)
    def refresh_project(task):
        client.refresh(task["id"]).raise_for_status()

    refresh_project.enqueue(f"project:{project.pk}", {"id": project.pk})

and ``manage.py consume_claimed refresh`` runs it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypedDict, TypeVar, Unpack, overload

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules

from astral_taskclaim.claims.async_api import aenqueue_claimed
from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.consumer.concurrency import check_group, limit_of
from astral_taskclaim.consumer.consume import Consumer
from astral_taskclaim.consumer.deferral import nameable
from astral_taskclaim.consumer.dispatch import QueueConsumer, naming_task, shared_with_runner
from astral_taskclaim.consumer.retry import RetryAfter, RetryAfterMs, requested_retry_after_ms
from astral_taskclaim.consumer.summary import ConsumeSummary, TaskOptions, accept_task, history_note
from astral_taskclaim.core import validation
from astral_taskclaim.core.validation import TrailingOption
from astral_taskclaim.queues import MessageBatch, queues
from astral_taskclaim.queues.runs import HistoryMode, history_problem

__all__ = [
    "ClaimedTask",
    "EnqueueOptions",
    "RetryAfter",
    "RetryAfterMs",
    "TaskRegistry",
    "autodiscover",
    "claimed_task",
    "registry",
]

T = TypeVar("T")


class ClaimedTask(Generic[T]):
    """A registered run function; calling it runs the task directly.

    ``parse`` turns a message's task into what ``run`` takes, returning
    ``None`` (or raising) for one it cannot run; the default accepts any
    task but JSON ``null``. ``retry_after_ms`` maps a failure to the wait it
    asks for; it is consulted before :class:`RetryAfter`, which is always
    honoured. ``history`` is what the run history (``taskclaim.run``) keeps
    of its runs: ``"all"``, ``"failures"`` (failed attempts and give-ups)
    or ``"none"``; ``None`` (the default) takes the queue's ``HISTORY``.
    ``default``: the task of its queue's messages that name none.
    ``key_namespace``: claim keys as ``"<namespace>:<key>"``, apart from other tasks' keys.
    ``trailing`` (``"latest"``, ``"first"``): a trigger on a claimed key is
    never dropped but becomes its follow-up run (:doc:`/flow-control`).
    ``time_limit``: seconds a run may take (``None``: the queue's ``TIME_LIMIT``,
    if any), past which it fails (:mod:`~astral_taskclaim.consumer.time_limits`).
    ``concurrency_limit=N``: at most N at once per ``concurrency_group(task)`` (default: the task).
    """

    def __init__(
        self,
        run: Callable[[T], object],
        *,
        queue: str = "default",
        max_retries: int = 3,
        parse: Callable[[Any], T | None] | None = None,
        retry_after_ms: RetryAfterMs | None = None,
        name: str | None = None,
        window_seconds: float | None = None,
        history: HistoryMode | None = None,
        default: bool = False,
        key_namespace: str | None = None,
        trailing: TrailingOption = None,
        time_limit: float | None = None,
        concurrency_limit: int | None = None,
        concurrency_group: Callable[[T], str] | None = None,
    ) -> None:
        if not callable(run):
            raise TypeError(f"a claimed task must decorate a function, got {run!r}")
        validation.validate_text(queue, name="queue")
        validation.validate_max_retries(max_retries)
        validation.validate_callable(parse, name="parse", required=False)
        validation.validate_callable(retry_after_ms, name="retry_after_ms", required=False)
        if name is not None and not nameable(name):
            raise ValueError(f"name must be a non-empty str without NUL, got {name!r}")
        if name is None and not hasattr(run, "__qualname__"):
            raise TypeError(f"{run!r} is not a function and has no name of its own: give name=...")
        if window_seconds is not None:
            validation.validate_window(window_seconds)
        if history is not None and (problem := history_problem(history)) is not None:
            raise ValueError(f"history {problem}")
        self.history = history
        if key_namespace is not None:
            validation.validate_text(key_namespace, name="key_namespace")
        self.run = run
        self.queue = queue
        self.max_retries = max_retries
        self.parse: Callable[[Any], T | None] = parse or accept_task
        self.custom_retry_after_ms = retry_after_ms
        self.name = name or f"{run.__module__}.{run.__qualname__}"  # type: ignore[attr-defined]
        self.window_seconds = window_seconds
        self.default = bool(default)
        self.key_namespace = key_namespace
        self.trailing = validation.validate_trailing(trailing)
        self.time_limit = validation.validate_time_limit(time_limit)
        self.concurrency = limit_of(concurrency_limit, concurrency_group, default=self.name)
        #: The registry holding this task, which says whether its queue has others.
        self.registry: TaskRegistry | None = None
        functools.update_wrapper(self, run)

    def __repr__(self) -> str:
        return f"<ClaimedTask {self.name} on queue {self.queue!r}>"

    def __call__(self, task: T) -> object:
        return self.run(task)

    def retry_after_ms(self, exception: BaseException) -> object:
        """The wait ``exception`` asks for, in milliseconds, or ``None``."""
        if self.custom_retry_after_ms is not None:
            requested = self.custom_retry_after_ms(exception)
            if requested is not None:
                return requested
        return requested_retry_after_ms(exception)

    def enqueue(self, key: str, task: Any, **options: Unpack[EnqueueOptions]) -> str | None:
        """``enqueue_claimed(queues[self.queue], key, task, ...)``: the claim
        token, or ``None`` while a claim holds ``key``. ``window_seconds``
        defaults to the task's."""
        found = self._options(options, "enqueue")
        check_group(self.concurrency, self.parse, task, owner=self.name)
        return enqueue_claimed(self._queue(), self.claim_key(key), task, **found)

    async def aenqueue(self, key: str, task: Any, **options: Unpack[EnqueueOptions]) -> str | None:
        """:meth:`enqueue` for async code: ``aenqueue_claimed(queues[self.queue],
        key, task, ...)``, which commits on its own (never in a transaction)."""
        found = self._options(options, "aenqueue")
        check_group(self.concurrency, self.parse, task, owner=self.name)
        return await aenqueue_claimed(self._queue(), self.claim_key(key), task, **found)

    def claim_key(self, key: str) -> str:
        """The key claimed for ``key``: in the task's ``key_namespace``, if any."""
        return key if self.key_namespace is None else f"{self.key_namespace}:{key}"

    def _queue(self) -> Any:
        """The queue's backend; naming this task when the queue has others."""
        backend = queues[self.queue]
        if self.registry is not None and len(self.registry.tasks_of(self.queue)) > 1:
            return naming_task(backend, self.name)
        return backend

    def _options(self, options: EnqueueOptions, method: str) -> dict[str, Any]:
        """``options`` with the task's defaults; ``TypeError`` for an unknown keyword."""
        if unknown := options.keys() - EnqueueOptions.__optional_keys__:
            raise TypeError(f"{self.name}.{method}() got unexpected keyword {sorted(unknown)[0]!r}")
        window = options.get("window_seconds")
        window = self.window_seconds if window is None else window
        if window is None:
            raise ValueError(
                f"{self.name}.{method}() needs window_seconds (the task declares no default)"
            )
        trailing = options.get("trailing", self.trailing)
        return {"window_seconds": window, "trailing": trailing, "using": options.get("using")}

    def consumer(self, *, using: str | None = None) -> Consumer:
        """What runs this task's messages (the worker calls its ``consume_one``),
        made once per batch; one naming another task waits as unknown."""
        return Consumer(self.queue, [self]).consumer(using=using)

    def prepare(self, consumer: Consumer, *_: object) -> TaskOptions:
        """The consumer's hook before a run: this task's options and history."""
        note = history_note(self.name, self.history or consumer.history)
        options = (self.parse, self.run, self.max_retries, self.retry_after_ms)
        return TaskOptions(
            *options, history=note, time_limit=self.time_limit, concurrency=self.concurrency
        )

    def consume(self, batch: MessageBatch, *, using: str | None = None) -> ConsumeSummary:
        """Runs ``batch`` as ``consume_claimed`` does, with this task's options."""
        return self.consumer(using=using).consume(batch)


class EnqueueOptions(TypedDict, total=False):
    """The keyword arguments of :meth:`ClaimedTask.enqueue` and
    :meth:`ClaimedTask.aenqueue`."""

    #: The claim's window; the task's ``window_seconds`` when ``None``.
    window_seconds: float | None
    #: The database alias (``TASKCLAIM_DATABASE`` when ``None``).
    using: str | None
    #: A trigger on a claimed key becomes its follow-up run; the task's ``trailing`` when absent.
    trailing: TrailingOption


class TaskRegistry:
    """What consumes each queue: its entries by name, the queue's claimed
    tasks or the one runner that has the queue to itself (a Django Tasks
    backend's, see :func:`~astral_taskclaim.tasks_backend.register_runners`)."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[str, QueueConsumer]] = {}
        self._lock = threading.Lock()

    def register(self, task: ClaimedTask[Any]) -> ClaimedTask[Any]:
        """Adds ``task``; the same name again (a re-import) replaces it.
        ``ImproperlyConfigured`` for a second default on a queue, or a queue
        a runner has to itself."""
        with self._lock:
            entries = self._entries.get(task.queue, {})
            if (runner := _runner_of(entries)) is not None:
                raise shared_with_runner(task.queue, runner, task.name)
            others = [t for t in _tasks(entries) if t.name != task.name and t.default]
            default = next((t.name for t in others), None)
            if task.default and default is not None:
                raise ImproperlyConfigured(
                    f"queue {task.queue!r} already has a default task, {default}; "
                    f"{task.name} cannot be one too"
                )
            self._entries.setdefault(task.queue, {})[task.name] = task
            task.registry = self
        return task

    def set_runners(self, runners: Iterable[tuple[str, QueueConsumer]]) -> None:
        """Makes ``runners`` ((queue alias, runner) pairs) the queues'
        runners, replacing those set before. ``ImproperlyConfigured``,
        changing nothing, for a queue given twice or that claimed tasks use."""
        with self._lock:
            kept = {q: e for q, e in self._entries.items() if e and _runner_of(e) is None}
            for queue, runner in runners:
                entries = kept.setdefault(queue, {})
                other = next((e for e in entries.values() if e is not runner), None)
                if other is not None:
                    raise shared_with_runner(queue, runner, other.name)
                entries[runner.name] = runner
            self._entries = kept

    def unregister(self, queue: str, name: str | None = None) -> None:
        """Removes the task ``name`` of ``queue`` (every one when ``None``)."""
        with self._lock:
            if name is None:
                self._entries.pop(queue, None)
            else:
                self._entries.get(queue, {}).pop(name, None)

    def tasks_of(self, queue: str) -> list[ClaimedTask[Any]]:
        """The claimed tasks of ``queue``, in the order registered."""
        return _tasks(self._entries.get(queue, {}))

    def queues(self) -> set[str]:
        """The queue aliases something here consumes."""
        with self._lock:
            return {queue for queue, entries in self._entries.items() if entries}

    def get(self, queue: str) -> QueueConsumer:
        """What consumes ``queue``: its runner, its task, or its tasks as its
        :class:`~astral_taskclaim.consumer.consume.Consumer` when there are
        several; ``LookupError`` listing the registered ones."""
        with self._lock:
            entries = self._entries.get(queue, {})
            runner, tasks, known = _runner_of(entries), _tasks(entries), self.describe()
        if runner is not None:
            return runner
        if not tasks:
            raise LookupError(
                f"no claimed task is registered for queue {queue!r}; {known}. Claimed tasks "
                "are registered when their module is imported: each installed app's tasks.py "
                "is, at start-up; import a task declared elsewhere from there"
            )
        return tasks[0] if len(tasks) == 1 else Consumer(queue, tasks)

    def describe(self) -> str:
        """``registered: queue → task, ...`` (or that there are none)."""
        found = sorted((q, ", ".join(entries)) for q, entries in self._entries.items() if entries)
        if not found:
            return "no claimed tasks are registered (is the app's tasks module imported?)"
        return "registered: " + ", ".join(f"{q} → {names}" for q, names in found)

    def __iter__(self) -> Iterator[ClaimedTask[Any]]:
        """The claimed tasks (not the runners)."""
        with self._lock:
            return iter([task for entries in self._entries.values() for task in _tasks(entries)])

    def __len__(self) -> int:
        return len(list(iter(self)))

    @overload
    def task(self, run: Callable[[T], object], /) -> ClaimedTask[T]: ...

    @overload
    def task(
        self,
        run: None = None,
        /,
        *,
        queue: str = ...,
        max_retries: int = ...,
        parse: Callable[[Any], T | None] | None = ...,
        retry_after_ms: RetryAfterMs | None = ...,
        name: str | None = ...,
        window_seconds: float | None = ...,
        history: HistoryMode | None = ...,
        default: bool = ...,
        key_namespace: str | None = ...,
        trailing: TrailingOption = ...,
        time_limit: float | None = ...,
        concurrency_limit: int | None = ...,
        concurrency_group: Callable[[T], str] | None = ...,
    ) -> Callable[[Callable[[T], object]], ClaimedTask[T]]: ...

    def task(
        self, run: Callable[[T], object] | None = None, /, **options: Any
    ) -> ClaimedTask[T] | Callable[[Callable[[T], object]], ClaimedTask[T]]:
        """Decorator registering a run function as a claimed task (see
        :class:`ClaimedTask` for the options); usable bare or with options."""

        def decorate(function: Callable[[T], object]) -> ClaimedTask[T]:
            return self.register(ClaimedTask(function, **options))

        return decorate if run is None else decorate(run)


def _tasks(entries: dict[str, QueueConsumer]) -> list[ClaimedTask[Any]]:
    return [entry for entry in entries.values() if isinstance(entry, ClaimedTask)]


def _runner_of(entries: dict[str, QueueConsumer]) -> QueueConsumer | None:
    return next((entry for entry in entries.values() if not isinstance(entry, ClaimedTask)), None)


#: The registry ``claimed_task`` and ``manage.py consume_claimed`` use.
registry = TaskRegistry()
#: ``@claimed_task(queue=..., ...)``: :meth:`TaskRegistry.task` on :data:`registry`.
claimed_task = registry.task


def autodiscover() -> None:
    """Imports every installed app's ``tasks`` module (done at start-up)."""
    autodiscover_modules("tasks")
