"""``manage.py enqueue_claimed QUEUE KEY --task JSON --window SECONDS``, or
``--file`` with JSON lines for many.

Prints the claim token. A key already claimed is the normal outcome of a
trigger inside the window, not an error: the command says so on stderr
and, run from the command line, exits with status :data:`_ALREADY_CLAIMED`
(3) so scripts can tell it from a send (0) and from an error (1).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from django.core.management.base import CommandError, CommandParser

from astral_taskclaim.claims.bulk import enqueue_claimed_many
from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.consumer.concurrency import check_group
from astral_taskclaim.consumer.dispatch import naming_task
from astral_taskclaim.core.envelope import PLACEHOLDER_TOKEN, message_body
from astral_taskclaim.core.logtext import printable
from astral_taskclaim.core.not_migrated import NotMigratedError
from astral_taskclaim.core.validation import (
    check_configured,
    check_encodes,
    validate_key,
    validate_window,
)
from astral_taskclaim.management.base import (
    AppCommand,
    add_database_argument,
    database_argument,
    seconds_type,
)
from astral_taskclaim.queues import BaseQueue, create_queue
from astral_taskclaim.tasks import ClaimedTask, registry

#: Exit status when KEY is already claimed (nothing was sent).
_ALREADY_CLAIMED = 3
_LINE_FIELDS = frozenset({"key", "task", "window"})
_BAR_WIDTH = 30
#: Most lines one ``enqueue_claimed_many`` call of ``--file`` takes.
_BATCH_LINES = 1000


@dataclass(frozen=True)
class _Item:
    """One task to enqueue, checked."""

    key: str
    task: Any
    window: float


class Command(AppCommand):
    help = (
        "Enqueues a claimed task on QUEUE under KEY and prints its claim token; if KEY is "
        f"already claimed, says so and exits {_ALREADY_CLAIMED}. With --file, enqueues JSON "
        'lines ({"key": ..., "task": ..., "window": ...}, window optional).'
    )
    #: The exit status :meth:`run_from_argv` ends with: 0, or _ALREADY_CLAIMED.
    exit_status = 0
    #: The key claimed for a KEY given: in the task's ``key_namespace``, if any.
    claim_key: Callable[[str], str] = staticmethod(lambda key: key)
    #: The claimed task the messages are for (``None``: none registered).
    task: ClaimedTask[Any] | None = None

    def run_from_argv(self, argv: list[str]) -> None:
        """Runs the command as ``manage.py`` does, then exits with
        :data:`_ALREADY_CLAIMED` if the key was already claimed."""
        super().run_from_argv(argv)
        if self.exit_status:
            sys.exit(self.exit_status)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queue", help="A TASKCLAIM_QUEUES alias.")
        parser.add_argument("key", nargs="?", help="The claim key, e.g. project:42.")
        parser.add_argument("--task", help="The task as JSON, e.g. '{\"id\": 42}'.")
        parser.add_argument(
            "--window",
            type=seconds_type(validate_window),
            default=None,
            help="Claim window in seconds (default: the task's window_seconds).",
        )
        parser.add_argument(
            "--task-name",
            help="The claimed task of QUEUE to run it, by name, as its .enqueue() would send "
            "it (its key_namespace applies); default: the queue's one task, or its "
            "default=True task.",
        )
        parser.add_argument("--file", help="JSON lines to enqueue ('-' reads stdin).")
        parser.add_argument(
            "--trailing",
            choices=["latest", "first", "off"],
            help="On a claimed key, queue its follow-up run (with the latest or the first "
            "task) instead of dropping it; default: the task's trailing.",
        )
        add_database_argument(parser)

    def run(self, options: dict[str, Any]) -> None:
        self.exit_status = 0
        queue, task = self._target(options["queue"], options["task_name"])
        using = database_argument(options)
        default_window = options["window"]
        if default_window is None and task is not None:
            default_window = task.window_seconds
        self.task = task
        self.claim_key = (lambda key: key) if task is None else task.claim_key
        trailing = options["trailing"] or (task.trailing if task is not None else None)
        self.trailing = None if trailing == "off" else trailing
        if options["file"] is not None:
            if options["key"] is not None or options["task"] is not None:
                raise CommandError("give either KEY with --task, or --file, not both")
            items = self._read_file(options["file"], queue, default_window)
            self._enqueue_many(queue, items, using, options["verbosity"])
            return
        if options["key"] is None or options["task"] is None:
            raise CommandError("KEY and --task are required (or give --file)")
        try:
            task = _read_json(options["task"])
        except ValueError as error:
            raise CommandError(f"--task is {error}") from None
        item = self._item({"key": options["key"], "task": task}, queue, default_window, "")
        token = enqueue_claimed(
            queue,
            item.key,
            item.task,
            window_seconds=item.window,
            trailing=self.trailing,
            using=using,
        )
        if getattr(token, "outcome", "sent") != "sent":
            outcome = getattr(token, "outcome", "").replace("_", " ")
            self.stderr.write(f"{printable(item.key)} is claimed: {outcome}", style_func=str)
        if token is None:
            # Coalesced into the task already queued: an outcome, not a failure.
            self.stderr.write(
                f"{printable(item.key)} is already claimed; nothing sent", style_func=str
            )
            self.exit_status = _ALREADY_CLAIMED
            return
        self.stdout.write(token)

    def _target(self, alias: str, name: str | None) -> tuple[BaseQueue, ClaimedTask[Any] | None]:
        """Queue ``alias`` and the claimed task its messages are for: the
        one named, or the queue's one or default task (``None``: the queue
        has no claimed task here); the queue names the task in its bodies
        when it carries several."""
        tasks = registry.tasks_of(alias)
        if not tasks and alias in registry.queues():  # a runner has the queue to itself
            raise CommandError(
                f"queue {alias!r} carries the {registry.get(alias).name}, whose worker runs "
                "no message of enqueue_claimed: enqueue those Tasks with Task.enqueue()"
            )
        queue = create_queue(alias)
        check_configured(queue)  # a misconfigured queue fails here, before a key is claimed
        known = ", ".join(task.name for task in tasks) or "none registered"
        if name is not None:
            task = next((t for t in tasks if t.name == name), None)
            if task is None:
                raise CommandError(f"queue {alias!r} has no claimed task {name!r} ({known})")
        else:
            task = tasks[0] if len(tasks) == 1 else next((t for t in tasks if t.default), None)
            if task is None and tasks:
                raise CommandError(
                    f"queue {alias!r} carries several claimed tasks ({known}) and no default: "
                    "give --task-name"
                )
        if task is not None and len(tasks) > 1:
            queue = naming_task(queue, task.name)
        return queue, task

    def _item(
        self, fields: dict[str, Any], queue: BaseQueue, default_window: float | None, where: str
    ) -> _Item:
        """``fields`` checked as a task to enqueue; ``CommandError`` naming
        ``where`` (a line) and the field otherwise."""
        window = fields.get("window", default_window)
        if window is None:
            raise CommandError(f"{where}no window: give --window (or 'window' on each line)")
        try:
            key = validate_key(self.claim_key(validate_key(fields["key"])))
            # The rules enqueue_claimed applies (more than 0 included), so
            # no line fails after earlier lines were sent.
            window = validate_window(window, name="window")
            if (task := self.task) is not None:
                check_group(task.concurrency, task.parse, fields["task"], owner=task.name)
            # The body a real token will make, so a too-big task fails before any send.
            check_encodes(queue, [message_body(key, PLACEHOLDER_TOKEN, window, fields["task"])])
        except (TypeError, ValueError) as error:
            raise CommandError(f"{where}{error}") from error
        return _Item(key=key, task=fields["task"], window=window)

    def _read_file(self, path: str, queue: BaseQueue, default_window: float | None) -> list[_Item]:
        """Every line checked before anything is enqueued."""
        try:
            # Bytes, decoded line by line, so a line that is not UTF-8 is named.
            stream: IO[bytes] = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
        except OSError as error:
            raise CommandError(f"--file: cannot open {path!r}: {error.strerror}") from error
        items = []
        with stream:
            for number, raw in enumerate(stream, start=1):
                where = f"--file line {number}: "
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise CommandError(f"{where}not UTF-8 ({error.reason})") from error
                if not line.strip():
                    continue
                try:
                    fields = _line_fields(line)
                except ValueError as error:
                    raise CommandError(f"{where}{error}") from None
                items.append(self._item(fields, queue, default_window, where))
        return items

    def _enqueue_many(
        self, queue: BaseQueue, items: list[_Item], using: str | None, verbosity: int
    ) -> None:
        """Enqueues ``items`` with ``enqueue_claimed_many``, in batches of
        consecutive lines that share a window (at most :data:`_BATCH_LINES`
        each), so the rules are those of one call and a batch costs one
        statement on the PostgreSQL queue (or an outbox)."""
        sent = claimed = done = 0
        total = len(items)
        # A bar is for a person watching: not in a log file or a pipe.
        show_bar = verbosity >= 1 and self.stdout.isatty() and self.stderr.isatty()
        for batch in _batches(items):
            pairs = [(item.key, item.task) for item in batch]
            try:
                tokens = enqueue_claimed_many(
                    queue,
                    pairs,
                    window_seconds=batch[0].window,
                    trailing=self.trailing,
                    using=using,
                )
            except NotMigratedError:
                raise
            except Exception as error:
                raise CommandError(
                    f"lines {done + 1}-{done + len(batch)} (from {batch[0].key!r}) failed after "
                    f"{sent} enqueued: {printable(error)}"
                ) from error
            for item, token in zip(batch, tokens, strict=True):
                if token is None or getattr(token, "outcome", "sent") != "sent":
                    claimed += 1
                else:
                    sent += 1
                    if verbosity >= 2:
                        self.stdout.write(f"{printable(item.key)} {token}")
            done += len(batch)
            if show_bar:
                self._progress(done, total)
        if show_bar and total:
            self.stderr.write("", style_func=str)
        held = "already claimed" if self.trailing is None else "claimed, as follow-ups"
        self.stdout.write(f"{sent} enqueued, {claimed} {held}, {total} lines")

    def _progress(self, done: int, total: int) -> None:
        filled = _BAR_WIDTH * done // total
        bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
        self.stderr.write(f"\r[{bar}] {done}/{total}", ending="", style_func=str)
        self.stderr.flush()


def _batches(items: list[_Item]) -> Iterator[list[_Item]]:
    """``items`` in order, in runs of at most :data:`_BATCH_LINES` that share
    one window (``enqueue_claimed_many`` takes one window per call)."""
    batch: list[_Item] = []
    for item in items:
        if batch and (len(batch) == _BATCH_LINES or item.window != batch[0].window):
            yield batch
            batch = []
        batch.append(item)
    if batch:
        yield batch


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise ValueError(f"{text} is out of range for a JSON number")
    return number


def _line_fields(line: str) -> dict[str, Any]:
    """The fields of one ``--file`` line, else ``ValueError`` saying what is
    wrong with it."""
    fields = _read_json(line)
    if not isinstance(fields, dict):
        raise ValueError("expected a JSON object with key and task")
    unknown = sorted(set(fields) - _LINE_FIELDS)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}")
    missing = sorted({"key", "task"} - set(fields))
    if missing:
        raise ValueError(f"missing {' and '.join(missing)}")
    return fields


def _read_json(text: str) -> Any:
    """``text`` as strict JSON, else ``ValueError`` saying what is wrong (to
    follow the option or line it came from). Python's reader alone would
    accept NaN, Infinity and numbers out of range, which no queue may send,
    and raise ``RecursionError`` for deep nesting."""
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError("nested too deeply to read as JSON") from None
    except ValueError as error:
        raise ValueError(f"not valid JSON: {error}") from None
