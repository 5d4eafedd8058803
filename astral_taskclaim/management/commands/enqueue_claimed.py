"""``manage.py enqueue_claimed QUEUE KEY --task JSON --window SECONDS``, or
``--file`` with JSON lines for many.

Prints the claim token. A key already claimed exits with status
:data:`ALREADY_CLAIMED` (3) and says so on stderr; other errors exit 1.
"""

from __future__ import annotations

import json
import math
import sys
import uuid
from dataclasses import dataclass
from typing import IO, Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from ...claims import enqueue_claimed, envelope, validate_key, validate_seconds
from ...conf import app_settings
from ...queues import BaseQueue, create_queue, unknown_queue
from ...tasks import registry

#: Exit status when KEY is already claimed (nothing was sent).
ALREADY_CLAIMED = 3
# Any well-formed token: only its length matters for the size check.
_SAMPLE_TOKEN = str(uuid.UUID(int=0))
_LINE_FIELDS = frozenset({"key", "task", "window"})
_BAR_WIDTH = 30


@dataclass(frozen=True)
class Item:
    """One task to enqueue, checked."""

    key: str
    task: Any
    window: float


class Command(BaseCommand):
    help = (
        "Enqueues a claimed task on QUEUE under KEY and prints its claim token; exits "
        f"{ALREADY_CLAIMED} if KEY is already claimed. With --file, enqueues JSON lines "
        '({"key": ..., "task": ..., "window": ...}, window optional).'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queue", help="A TASKCLAIM_QUEUES alias.")
        parser.add_argument("key", nargs="?", help="The claim key, e.g. project:42.")
        parser.add_argument("--task", help="The task as JSON, e.g. '{\"id\": 42}'.")
        parser.add_argument(
            "--window",
            type=_seconds,
            default=None,
            help="Claim window in seconds (default: the queue's task's window_seconds).",
        )
        parser.add_argument("--file", help="JSON lines to enqueue ('-' reads stdin).")
        parser.add_argument(
            "--database", default=None, help="Database alias (default: TASKCLAIM_DATABASE)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        queue = self._queue(options["queue"])
        using = options["database"]
        if using is not None and using not in connections.settings:
            raise CommandError(f"--database: unknown database alias {using!r}")
        default_window = self._default_window(options["queue"], options["window"])
        if options["file"] is not None:
            if options["key"] is not None or options["task"] is not None:
                raise CommandError("give either KEY with --task, or --file, not both")
            items = self._read_file(options["file"], queue, default_window)
            self._enqueue_many(queue, items, using, options["verbosity"])
            return
        if options["key"] is None or options["task"] is None:
            raise CommandError("KEY and --task are required (or give --file)")
        try:
            task = json.loads(options["task"])
        except ValueError as error:
            raise CommandError(f"--task is not valid JSON: {error}") from error
        item = self._item({"key": options["key"], "task": task}, queue, default_window, "")
        token = enqueue_claimed(queue, item.key, item.task, window_seconds=item.window, using=using)
        if token is None:
            raise CommandError(
                f"key {item.key!r} is already claimed; nothing was sent", returncode=ALREADY_CLAIMED
            )
        self.stdout.write(token)

    def _queue(self, alias: str) -> BaseQueue:
        if alias not in app_settings.QUEUES:
            raise CommandError(unknown_queue(alias))
        try:
            queue = create_queue(alias)
        except ImproperlyConfigured as error:
            raise CommandError(str(error)) from error
        # A misconfigured queue fails here, before a key is claimed.
        errors = [message.msg for message in queue.check() if message.is_serious()]
        if errors:
            raise CommandError("; ".join(errors))
        return queue

    def _default_window(self, alias: str, window: float | None) -> float | None:
        if window is not None:
            if not math.isfinite(window) or window < 0:
                raise CommandError(f"--window must be a finite number from 0, got {window}")
            return window
        try:
            return registry.get(alias).window_seconds
        except LookupError:
            return None

    def _item(
        self, fields: dict[str, Any], queue: BaseQueue, default_window: float | None, where: str
    ) -> Item:
        """``fields`` checked as a task to enqueue; ``CommandError`` naming
        ``where`` (a line) and the field otherwise."""
        window = fields.get("window", default_window)
        if window is None:
            raise CommandError(f"{where}no window: give --window (or 'window' on each line)")
        try:
            key = validate_key(fields["key"])
            window = validate_seconds(window, name="window")
            # The body a real token will make, so a too-big task fails before any send.
            queue.encode(envelope(key, _SAMPLE_TOKEN, window, fields["task"]))
        except (TypeError, ValueError) as error:
            raise CommandError(f"{where}{error}") from error
        return Item(key=key, task=fields["task"], window=window)

    def _read_file(self, path: str, queue: BaseQueue, default_window: float | None) -> list[Item]:
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
                    fields = json.loads(line)
                except ValueError as error:
                    raise CommandError(f"{where}not valid JSON: {error}") from error
                if not isinstance(fields, dict):
                    raise CommandError(f"{where}expected a JSON object with key and task")
                unknown = sorted(set(fields) - _LINE_FIELDS)
                if unknown:
                    raise CommandError(f"{where}unknown field(s) {', '.join(unknown)}")
                missing = sorted({"key", "task"} - set(fields))
                if missing:
                    raise CommandError(f"{where}missing {' and '.join(missing)}")
                items.append(self._item(fields, queue, default_window, where))
        return items

    def _enqueue_many(
        self, queue: BaseQueue, items: list[Item], using: str | None, verbosity: int
    ) -> None:
        sent = claimed = 0
        total = len(items)
        shown = -1
        for done, item in enumerate(items, start=1):
            try:
                token = enqueue_claimed(
                    queue, item.key, item.task, window_seconds=item.window, using=using
                )
            except Exception as error:
                raise CommandError(
                    f"item {done} ({item.key!r}) failed after {sent} enqueued: {error}"
                ) from error
            if token is None:
                claimed += 1
            else:
                sent += 1
                if verbosity >= 2:
                    self.stdout.write(f"{item.key} {token}")
            percent = done * 100 // total
            if percent != shown:
                shown = percent
                self._progress(done, total)
        if total:
            self.stderr.write("", style_func=str)
        self.stdout.write(f"{sent} enqueued, {claimed} already claimed, {total} lines")

    def _progress(self, done: int, total: int) -> None:
        filled = _BAR_WIDTH * done // total
        bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
        self.stderr.write(f"\r[{bar}] {done}/{total}", ending="", style_func=str)
        self.stderr.flush()


def _seconds(text: str) -> float:
    # "300" stays an int, so the envelope says 300 like a TypeScript producer
    # (not 300.0).
    try:
        return int(text)
    except ValueError:
        return float(text)
