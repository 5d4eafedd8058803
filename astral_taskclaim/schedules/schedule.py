"""Schedules: a timing, what each slot enqueues, and the registry of them.

Declared with :func:`periodic` above a claimed task's or Django Task's own
decorator::

    @periodic(cron("0 * * * *", zone="Europe/Berlin"), key="report:hourly", task={"all": True})
    @claimed_task(queue="reports", window_seconds=300)
    def report(task): ...

or in ``TASKCLAIM_SCHEDULES`` (:func:`_from_settings`). A key holding
``{slot}`` gets the slot's UTC instant, a task per slot; otherwise slots
share the key and coalesce with whatever holds it. ``in_database=True``
leaves the slots to pg_cron (:mod:`astral_taskclaim.schedules.in_database`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.envelope import encode_json
from astral_taskclaim.core.validation import validate_key, validate_seconds
from astral_taskclaim.schedules.timing import Cron, Every, Timing
from astral_taskclaim.tasks import ClaimedTask

Missed = Literal["once", "skip"]
#: What a schedule does with slots no worker saw within ``grace_seconds``
#: (every worker was down): ``"once"`` enqueues the newest of them once,
#: ``"skip"`` leaves them; slots seen in time are each enqueued either way.
_MISSED: tuple[Missed, ...] = ("once", "skip")
#: How late a slot may be seen and still count as on time (each enqueued).
DEFAULT_GRACE = 300.0

F = TypeVar("F")


def cron(expression: str, *, zone: str = "UTC") -> Cron:
    """Slots where ``expression`` matches the wall clock of ``zone``."""
    return Cron(expression, zone)


def every(seconds: int) -> Every:
    """A slot every ``seconds``."""
    return Every(seconds)


@dataclass(frozen=True)
class Schedule:
    """One schedule. ``target``: a :class:`~astral_taskclaim.tasks.ClaimedTask`
    (enqueued with ``task``), a Django Task (enqueued with ``args`` and
    ``kwargs``), or a plain function of no argument run by the worker that
    wins the slot (the app's own upkeep). ``key``: the task key each slot
    enqueues (default: the schedule's name). ``in_database``: pg_cron
    enqueues the slots inside PostgreSQL, not the workers."""

    name: str
    timing: Timing
    target: Any
    key: str
    task: Any = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    missed: Missed = "once"
    grace_seconds: float = DEFAULT_GRACE
    in_database: bool = False

    def __post_init__(self) -> None:
        validate_key(self.name, name="schedule name")
        if "@" in self.name:
            raise ValueError(f"schedule name {self.name!r} must not contain '@' (slot keys use it)")
        if not isinstance(self.timing, Timing):
            raise TypeError(f"schedule {self.name}: timing must be cron(...) or every(...)")
        validate_key(self.key, name=f"schedule {self.name}: key")
        if self.missed not in _MISSED:
            raise ValueError(f"schedule {self.name}: missed must be one of {_MISSED}")
        validate_seconds(self.grace_seconds, name=f"schedule {self.name}: grace_seconds")
        if not isinstance(self.in_database, bool):
            raise TypeError(f"schedule {self.name}: in_database must be True or False")
        kind = self.kind
        if kind == "claimed" and self.task is None:
            raise ValueError(
                f"schedule {self.name} of task {self.target_name}: a claimed task's slot "
                'needs task=... ("payload" in TASKCLAIM_SCHEDULES): the JSON value each '
                "slot's message carries to the task function, as enqueue(key, task) does; "
                "give {} for none (system check astral_taskclaim.E050)"
            )
        if kind != "claimed" and self.task is not None:
            raise ValueError(f"schedule {self.name}: task=... is for claimed tasks; give args")
        if kind == "function" and (self.args or self.kwargs):
            raise ValueError(f"schedule {self.name}: a function schedule takes no arguments")
        encode_json(self.task, name=f"schedule {self.name}: task")
        encode_json([list(self.args), self.kwargs], name=f"schedule {self.name}: arguments")

    @property
    def kind(self) -> Literal["claimed", "django", "function"]:
        """What the target is."""
        if isinstance(self.target, ClaimedTask):
            return "claimed"
        if callable(getattr(self.target, "using", None)) and hasattr(self.target, "module_path"):
            return "django"
        if callable(self.target):
            return "function"
        raise TypeError(f"schedule {self.name}: {self.target!r} is not a task or a function")

    @property
    def target_name(self) -> str:
        """The target's dotted name, as the admin shows it."""
        return _target_name(self.target)

    def task_key(self, slot_text: str) -> str:
        """The task key slot ``slot_text`` enqueues."""
        return self.key.replace("{slot}", slot_text)


def _target_name(target: Any) -> str:
    """A task's or function's dotted name."""
    if isinstance(target, ClaimedTask):
        return target.name
    path = getattr(target, "module_path", None)
    if isinstance(path, str):
        return path
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"


class _ScheduleRegistry:
    """Schedules by name; declaring one name twice is an error."""

    def __init__(self) -> None:
        self._schedules: dict[str, Schedule] = {}
        self._lock = threading.Lock()

    def add(self, schedule: Schedule) -> Schedule:
        """Adds ``schedule``; the same name with the same target again (a
        re-import) replaces it, another target is ``ImproperlyConfigured``."""
        with self._lock:
            current = self._schedules.get(schedule.name)
            if current is not None and current.target_name != schedule.target_name:
                raise ImproperlyConfigured(
                    f"schedule {schedule.name!r} is declared twice ({current.target_name} and "
                    f"{schedule.target_name}); give one of them name=..."
                )
            self._schedules[schedule.name] = schedule
        return schedule

    def remove(self, name: str) -> None:
        """Forgets schedule ``name``, if declared."""
        with self._lock:
            self._schedules.pop(name, None)

    def get(self, name: str) -> Schedule | None:
        """Schedule ``name``, or ``None``."""
        return self._schedules.get(name)

    def __iter__(self) -> Iterator[Schedule]:
        with self._lock:
            return iter(sorted(self._schedules.values(), key=lambda s: s.name))

    def __len__(self) -> int:
        return len(self._schedules)


#: The schedules :func:`periodic` declares and the workers run.
schedules = _ScheduleRegistry()


def periodic(
    timing: Timing,
    *,
    key: str | None = None,
    task: Any = None,
    args: list[Any] | tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    name: str | None = None,
    missed: Missed = "once",
    grace_seconds: float = DEFAULT_GRACE,
    in_database: bool = False,
) -> Callable[[F], F]:
    """Decorator declaring a :class:`Schedule` for the task below it (a
    ``@claimed_task`` or a Django ``@task``); the task is returned as is.
    ``name`` defaults to the task's dotted name; ``key`` to the name;
    ``in_database=True``: pg_cron enqueues the slots (a claimed task on the
    PostgreSQL queue, a UTC timing pg_cron runs exactly)."""

    def declare(target: F) -> F:
        found = name or _target_name(target)
        schedules.add(
            Schedule(
                found,
                timing,
                target,
                key if key is not None else found,
                task=task,
                args=tuple(args),
                kwargs=dict(kwargs or {}),
                missed=missed,
                grace_seconds=grace_seconds,
                in_database=in_database,
            )
        )
        return target

    return declare


SETTING_KEYS = frozenset(
    {
        *("task", "cron", "zone", "every", "key", "payload", "args", "kwargs"),
        *("missed", "grace_seconds", "in_database"),
    }
)


def _from_settings(value: object) -> list[Schedule]:
    """The schedules of ``TASKCLAIM_SCHEDULES``: ``{name: {"task": dotted path,
    "cron": expression, "zone": name | "every": seconds, "key": ...,
    "payload": claimed task's task | "args": [...], "kwargs": {...},
    "missed": "once" | "skip", "grace_seconds": ..., "in_database": bool}}``.
    ``ImproperlyConfigured``
    naming the schedule for anything wrong."""
    if not isinstance(value, dict):
        raise ImproperlyConfigured("TASKCLAIM_SCHEDULES must be a dict of name → schedule dicts")
    found = []
    for name, entry in value.items():
        where = f"TASKCLAIM_SCHEDULES[{name!r}]"
        try:
            if not isinstance(entry, dict):
                raise TypeError("must be a dict")
            unknown = sorted(set(entry) - SETTING_KEYS)
            if unknown:
                raise ValueError(f"unknown entry {unknown[0]!r}; known: {sorted(SETTING_KEYS)}")
            if ("cron" in entry) == ("every" in entry):
                raise ValueError("give exactly one of 'cron' and 'every'")
            timing: Timing = (
                Cron(entry["cron"], entry.get("zone", "UTC"))
                if "cron" in entry
                else Every(entry["every"])
            )
            if not isinstance(entry.get("task"), str):
                raise TypeError("'task' must be the dotted path of a task")
            target = import_string(entry["task"])
            found.append(
                Schedule(
                    str(name),
                    timing,
                    target,
                    entry.get("key", str(name)),
                    task=entry.get("payload"),
                    args=tuple(entry.get("args", ())),
                    kwargs=dict(entry.get("kwargs", {})),
                    missed=entry.get("missed", "once"),
                    grace_seconds=entry.get("grace_seconds", DEFAULT_GRACE),
                    in_database=entry.get("in_database", False),
                )
            )
        except (ImportError, TypeError, ValueError) as error:
            raise ImproperlyConfigured(f"{where}: {error}") from error
    return found


def declared() -> list[Schedule]:
    """The project's schedules by name: :func:`periodic` ones and
    ``TASKCLAIM_SCHEDULES`` (a setting's entry replaces a decorator's of its
    name). ``ImproperlyConfigured`` for a malformed setting."""
    found = {s.name: s for s in schedules}
    found.update((s.name, s) for s in _from_settings(app_settings.SCHEDULES))
    return sorted(found.values(), key=lambda s: s.name)
