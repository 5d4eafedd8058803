"""``manage.py consume_claimed [QUEUE ...]``: a worker for the claimed tasks
of some queues, or of every configured one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError, CommandParser, OutputWrapper
from django.db import DatabaseError

from astral_taskclaim.consumer.summary import TaskRun
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.logtext import counted, printable
from astral_taskclaim.core.not_migrated import NotMigratedError, ensure_migrated
from astral_taskclaim.core.validation import validate_count
from astral_taskclaim.management.loop import QueueLoopCommand
from astral_taskclaim.queues import QueueError, unknown_queue
from astral_taskclaim.schedules import Scheduler
from astral_taskclaim.worker.group import WorkerGroup, consumed_queues
from astral_taskclaim.worker.loop import Worker

#: The exit status after a sync run was left running past its time limit
#: (``EX_TEMPFAIL``): a supervisor restarts the worker, and the thread Python
#: cannot stop ends with the process.
HUNG_EXIT_STATUS = 75


class Command(QueueLoopCommand[WorkerGroup]):
    help = (
        "Consumes each QUEUE named, or every TASKCLAIM_QUEUES alias with a claimed task or a "
        "Django Tasks backend when none is, with the tasks registered for it: runs, retries "
        "and gives up as consume_claimed does. The first SIGTERM/SIGINT finishes the running "
        "messages, hands back those not started, settles and exits 0; a second exits at once. "
        f"A sync task run past its time limit makes it stop so and exit {HUNG_EXIT_STATUS}, "
        "for its supervisor to restart it."
    )
    queue_help = (
        "TASKCLAIM_QUEUES aliases (default: every one with a claimed task or a Django Tasks "
        "backend)."
    )
    many_queues = True

    def add_loop_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--concurrency",
            type=int,
            default=1,
            help="Messages run side by side per queue, each on a thread with its own "
            "database connection (default 1).",
        )
        parser.add_argument(
            "--queue-concurrency",
            action="append",
            default=[],
            metavar="QUEUE=N",
            help="Another --concurrency for one queue (repeatable).",
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=None,
            help="Most messages per batch (default: 10 per thread, from 10 to 100, within "
            "what the queue takes).",
        )
        parser.add_argument(
            "--wait",
            type=float,
            default=1.0,
            help="Seconds one receive waits for a message (default 1); with --burst, "
            "exit after waiting this long for nothing.",
        )
        parser.add_argument(
            "--burst",
            action="store_true",
            help="Drain the queue, then exit 0 (delayed retries stay queued).",
        )
        parser.add_argument(
            "--max-messages",
            type=int,
            default=None,
            help="Exit after receiving this many, all queues together.",
        )
        parser.add_argument(
            "--metrics-port",
            type=int,
            default=None,
            help="Serve Prometheus metrics on this port at /metrics (needs the "
            "'prometheus' extra).",
        )
        parser.add_argument(
            "--metrics-address",
            default="127.0.0.1",
            help="The address --metrics-port listens on (default 127.0.0.1, this machine "
            "only; 0.0.0.0 or :: for every interface).",
        )
        parser.add_argument(
            "--no-schedules",
            action="store_true",
            help="Take no part in enqueueing the schedules' slots (periodic tasks).",
        )

    def make(self, queue: list[str], options: dict[str, Any]) -> WorkerGroup:
        # Checked here, naming the option: the workers' own checks name a queue.
        validate_count("--concurrency", options["concurrency"])
        if options["max_messages"] is not None:
            validate_count("--max-messages", options["max_messages"])
        queues = consumed_queues(queue)
        return WorkerGroup(
            queues,
            caps=_caps(options["queue_concurrency"], queues),
            concurrency=options["concurrency"],
            batch_size=options["batch_size"],
            wait=options["wait"],
            burst=options["burst"],
            max_messages=options["max_messages"],
            # --verbosity 2 and up: a line per task run on stdout.
            on_run=self._print_run if options["verbosity"] >= 2 else None,
            scheduler=None if options["no_schedules"] else Scheduler(),
        )

    def prepare(self, loop: WorkerGroup, options: dict[str, Any]) -> None:
        for worker in loop.workers:
            _ensure_migrated(worker)
        if options["metrics_port"] is not None:
            _serve_metrics(loop.workers, options["metrics_port"], options["metrics_address"])

    def run_loop(self, loop: WorkerGroup, options: dict[str, Any]) -> None:
        loop.run()
        for worker in loop.workers if options["verbosity"] >= 1 else ():  # -v 0: warnings only
            self._say(str(worker.stats))
            if options["burst"]:
                self._say(_burst_report(worker))
        if hung := sum(worker.stats.hung for worker in loop.workers):
            raise CommandError(
                f"{counted(hung, 'task run')} left running past its time limit on a thread "
                "that cannot be stopped: exiting for a restart",
                returncode=HUNG_EXIT_STATUS,
            )

    def _print_run(self, run: TaskRun) -> None:
        self._say(str(run))

    def _say(self, line: str) -> None:
        """Writes ``line`` on stdout, :func:`printable` and in what the
        stream can encode: a line quoting a message's key (``-v 2``) must
        neither forge lines nor raise, or the worker dies before settling
        its batch, again at every restart."""
        self.stdout.write(_encodable(printable(line), self.stdout))


def _ensure_migrated(worker: Worker) -> None:
    """Exits with "run manage.py migrate" before consuming an unmigrated
    database; a database that cannot be reached is left to the worker's
    reconnecting loop."""
    aliases = {app_settings.DATABASE, getattr(worker.backend, "database", app_settings.DATABASE)}
    try:
        for alias in sorted(aliases):
            ensure_migrated(alias)
    except NotMigratedError:
        raise  # a DatabaseError too, but one the command ends on
    except DatabaseError:
        pass


def _caps(pairs: list[str], consumed: list[str]) -> dict[str, int]:
    """``--queue-concurrency QUEUE=N`` options as a mapping, each ``QUEUE``
    one of the ``consumed`` queues and each ``N`` from 1."""
    caps = {}
    for pair in pairs:
        queue, _, count = pair.rpartition("=")
        if not queue or not (count.isascii() and count.isdigit()):
            raise CommandError(f"--queue-concurrency takes QUEUE=N, got {pair!r}")
        if queue not in app_settings.QUEUES:
            raise CommandError(f"--queue-concurrency {pair}: {unknown_queue(queue)}")
        if queue not in consumed:
            raise CommandError(
                f"--queue-concurrency {pair}: queue {queue!r} is configured but not consumed "
                f"by this worker (consuming: {', '.join(consumed)})"
            )
        caps[queue] = validate_count(f"--queue-concurrency {pair}: concurrency", int(count))
    return caps


def _serve_metrics(workers: list[Worker], port: int, address: str) -> None:
    try:  # metrics needs prometheus_client, an optional extra: imported on demand
        from astral_taskclaim.worker.metrics import serve, worker_registry
    except ImportError as error:
        raise CommandError(str(error)) from error
    registry, on_run = worker_registry(*workers)
    for worker in workers:
        previous = worker.on_run
        worker.on_run = on_run if previous is None else _both(on_run, previous)
    try:
        serve(registry, port, address)
    except OSError as error:
        raise CommandError(f"--metrics-port {port} on {address}: {error}") from error


def _burst_report(worker: Worker) -> str:
    """What a ``--burst`` run did on its queue, and what it leaves behind there."""
    stats = worker.stats
    ran = counted(stats.messages, "message")
    text = (
        f"{worker.queue}: burst done: ran {ran} ({stats.counts()}); {stats.returned} handed "
        f"back unrun; {stats.left_leased} left leased (settlement not written: delivered again "
        "when their leases run out)"
    )
    try:
        status = worker.backend.status()
    except (DatabaseError, QueueError):
        return text
    finally:
        worker.backend.close()
    counts = [
        f"{value} {name}"
        for name, value in (
            ("ready", status.ready),
            ("delayed", status.delayed),
            ("leased", status.leased),
        )
        if value is not None
    ]
    return f"{text}; queue now: {', '.join(counts)}" if counts else text


def _encodable(text: str, stream: OutputWrapper) -> str:
    """``text``, with what the stream's encoding cannot write (a non-ASCII
    key on an ASCII console) as backslash escapes."""
    encoding = getattr(stream, "encoding", None)
    if not isinstance(encoding, str):
        return text  # a text buffer (StringIO) takes any str
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:
        pass
    return text


def _both(
    first: Callable[[TaskRun], object], then: Callable[[TaskRun], object]
) -> Callable[[TaskRun], None]:
    def both(run: TaskRun) -> None:
        first(run)
        then(run)

    return both
