"""``manage.py taskclaim_status``: claims and queue depths, as text or ``--json``."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandParser

from astral_taskclaim.claims.status import collect
from astral_taskclaim.core.logtext import counted, printable
from astral_taskclaim.management.base import AppCommand
from astral_taskclaim.schedules.overview import overview
from astral_taskclaim.worker.checks import unknown_task_counts

_COLUMNS = ("ready", "delayed", "leased", "oldest_age_seconds")


def _cell(value: Any) -> str:
    if value is None:
        return "?"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


class Command(AppCommand):
    help = (
        "Shows per queue the messages ready, delayed and leased and the oldest one's age, "
        "the claims active and expired, rows waiting in outboxes (and those set aside, "
        "refused by the service), PostgreSQL-queue messages naming a task no installed "
        "module registers (waiting for a worker that has it), the latest runs that gave up "
        "in the last day, and each schedule's last and next slot. '?' marks what a backend "
        "does not expose or could not tell; a queue that could not be asked shows its error "
        "on stderr."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="One JSON object, for scripts.")

    def run(self, options: dict[str, Any]) -> None:
        found = {**collect(), "unknown_tasks": unknown_task_counts(), "schedules": overview()}
        if options["json"]:
            self.stdout.write(json.dumps(found, indent=2, sort_keys=True))
            return
        claims = found["claims"]
        self.stdout.write(
            f"claims in {claims['database']}: {claims['active']} active, "
            f"{claims['expired']} expired"
        )
        rows = [("queue", "backend", "ready", "delayed", "leased", "oldest (s)")]
        problems = []
        for name, queue in found["queues"].items():
            backend = queue["backend"] or "?"
            rows.append((name, backend, *(_cell(queue.get(c)) for c in _COLUMNS)))
            if queue["error"]:
                problems.append(f"{name}: {queue['error']}")
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            self.stdout.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        for name, outbox in found["outboxes"].items():
            depth = f"{outbox['depth']}{'' if outbox['depth_exact'] else '+'}"
            self.stdout.write(
                f"outbox of {name}: {depth} rows waiting for the relay, oldest "
                f"{_cell(outbox['oldest_seconds'])} s, {outbox['dead']} set aside"
            )
        for name, unknown in found["unknown_tasks"].items():
            for entry in unknown:
                task = "no task" if entry["task"] is None else f"task {entry['task']!r}"
                self.stdout.write(
                    printable(
                        f"queue {name}: {counted(entry['messages'], 'message')} naming "
                        f"{task}, which no installed module registers: waiting for a worker "
                        "that has it"
                    )
                )
        self._failures(found["recent_failures"])
        for row in found["schedules"]:
            self.stdout.write(
                f"schedule {row['name']}: {row['task'] or '(no longer declared)'} "
                f"{row['expression'] or ''} {row['zone'] or ''}; last slot "
                f"{row['last_slot'] or 'never'} ({row['outcome'] or '-'}), next "
                f"{row['next_slot'] or '-'}"
                + (", enqueued by pg_cron" if row["enqueued_by"] == "pg_cron" else "")
            )
        for problem in problems:
            self.stderr.write(problem)

    def _failures(self, failures: list[dict[str, Any]]) -> None:
        if not failures:
            self.stdout.write("recent failures (last day): none")
            return
        self.stdout.write("recent failures (last day), newest first:")
        for failure in failures:
            error = ": ".join(
                str(p) for p in (failure["error_class"], failure["error_message"]) if p
            )
            self.stdout.write(
                printable(
                    f"  {_cell(failure['age_seconds'])} s ago  {failure['task']} "
                    f"{failure['key'] or '-'} ({failure['id']}) after {failure['attempts']} "
                    f"attempts{': ' + error[:200] if error else ''}"
                )
            )
