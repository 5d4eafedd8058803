"""What the long-running commands (``consume_claimed``, ``taskclaim_relay``)
share: the queue argument and its checks, the loop's two-stage shutdown and
its log on the command's stderr."""

from __future__ import annotations

import logging
import sys
from abc import abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Generic, Protocol, TypeVar

from django.core.management.base import CommandError, CommandParser, OutputWrapper

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.validation import check_configured
from astral_taskclaim.management.base import AppCommand
from astral_taskclaim.queues import BaseQueue, unknown_queue
from astral_taskclaim.worker.shutdown import TwoStageStop

#: Console log level by ``--verbosity``: 0 warnings, 1 a line per batch, 2+ debug.
_LEVELS = {0: logging.WARNING, 1: logging.INFO}


class _Loop(Protocol):
    """A loop a command runs: a worker or a relay."""

    @property
    def backend(self) -> BaseQueue: ...

    @property
    def stopper(self) -> TwoStageStop: ...


L = TypeVar("L", bound=_Loop)


class QueueLoopCommand(AppCommand, Generic[L]):
    """A command running one loop on queue ``QUEUE`` until it stops: the
    first SIGTERM/SIGINT lets it finish the work in hand, a second exits at
    once. Subclasses make the loop (:meth:`make`) and run it (:meth:`run_loop`)."""

    #: The help of the ``queue`` argument.
    queue_help = "A TASKCLAIM_QUEUES alias."
    #: Whether the command takes any number of queues (``options["queue"]``
    #: a list, maybe empty) instead of one.
    many_queues = False

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queue", help=self.queue_help, nargs="*" if self.many_queues else None)
        self.add_loop_arguments(parser)

    def add_loop_arguments(self, parser: CommandParser) -> None:
        """The command's own options."""

    @abstractmethod
    def make(self, queue: Any, options: dict[str, Any]) -> L:
        """The loop (raising ``LookupError``, ``TypeError`` or ``ValueError``
        for what the command line got wrong; ``ImproperlyConfigured`` for
        the settings)."""

    def prepare(self, loop: L, options: dict[str, Any]) -> None:
        """What to do once the queue's checks passed, before the loop runs."""

    @abstractmethod
    def run_loop(self, loop: L, options: dict[str, Any]) -> None:
        """Runs the loop (its log is on stderr, its signals handled) and
        prints what it did."""

    def run(self, options: dict[str, Any]) -> None:
        queue = options["queue"]
        for name in queue if self.many_queues else [queue]:
            if name not in app_settings.QUEUES:
                raise CommandError(unknown_queue(name))
        try:
            loop = self.make(queue, options)
            # A loop over several queues lists them all as ``backends``.
            for backend in getattr(loop, "backends", None) or [loop.backend]:
                check_configured(backend)
        except LookupError as error:
            raise CommandError(str(error.args[0])) from error
        except (TypeError, ValueError) as error:
            raise CommandError(str(error)) from error
        self.prepare(loop, options)
        with _console_log(self.stderr, options["verbosity"]), loop.stopper.signal_handlers():
            self.run_loop(loop, options)


@contextmanager
def _console_log(stderr: OutputWrapper, verbosity: int) -> Iterator[None]:
    """Shows the app's log records at ``verbosity`` while running: on the
    command's ``stderr``, or only through the project's own console handler
    when ``LOGGING`` gives the app one (each record printed once). The
    verbosity sets the app logger's level either way, so ``-v 0`` keeps
    ``INFO`` lines out of the project's handlers too."""
    level = _LEVELS.get(verbosity, logging.DEBUG)
    logger = logging.getLogger("astral_taskclaim")
    previous = logger.level
    handler = None if _prints_to_console(logger) else logging.StreamHandler(_Unstyled(stderr))
    if handler is not None:
        handler.setLevel(level)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
    # Lowered for -v 2; raised for -v 0 only where the records reach a
    # console anyway (a file or a pipeline of the project keeps its level).
    if logger.getEffectiveLevel() > level or handler is None:
        logger.setLevel(level)
    try:
        yield
    finally:
        if handler is not None:
            logger.removeHandler(handler)
        logger.setLevel(previous)


def _prints_to_console(logger: logging.Logger) -> bool:
    """Whether a handler the records of ``logger`` reach writes to the
    process's stderr or stdout (a project's ``LOGGING`` console handler)."""
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            stream = getattr(handler, "stream", None)
            if not isinstance(handler, logging.FileHandler) and stream in (sys.stderr, sys.stdout):
                return True
        current = current.parent if current.propagate else None
    return False


class _Unstyled:
    """A stream writing to a command's stderr without its error colour: log
    lines of every level are not errors."""

    def __init__(self, wrapper: OutputWrapper) -> None:
        self.wrapper = wrapper

    def write(self, text: str) -> None:
        self.wrapper.write(text, style_func=str, ending="")

    def flush(self) -> None:
        self.wrapper.flush()
