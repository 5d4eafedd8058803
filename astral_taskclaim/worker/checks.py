"""Internal: system check W036: a PostgreSQL queue holding messages that no worker
of this project would consume (registered by :mod:`astral_taskclaim.checks`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError

from astral_taskclaim.core.checks import CHECK_ID
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.queues import create_queue
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks import registry

__all__ = ["check_unconsumed_queues"]


@checks.register(checks.Tags.database)
def check_unconsumed_queues(
    databases: Sequence[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """W036 for a PostgreSQL queue holding messages that no registered task
    consumes: its workers would stop at start, the messages wait forever."""
    try:
        aliases = list(app_settings.QUEUES)
    except ImproperlyConfigured:
        return []  # reported as E006
    messages: list[checks.CheckMessage] = []
    for alias in aliases:
        try:
            registry.get(alias)
            continue
        except LookupError:
            pass
        try:
            queue = create_queue(alias)
            if not isinstance(queue, PostgresQueue) or queue.database not in (databases or ()):
                continue
            status = queue.status()
        except (ImproperlyConfigured, DatabaseError):
            continue  # E010 to E014, W007 or W030 says why
        held = (status.ready or 0) + (status.delayed or 0) + (status.leased or 0)
        if held:
            messages.append(
                checks.Warning(
                    f"queue {alias!r} holds {held} messages, but no claimed task of this "
                    "project consumes it: they wait until one is registered.",
                    hint="Claimed tasks are registered when their module is imported: each "
                    "installed app's tasks.py is, at start-up; import a task declared "
                    "elsewhere (say jobs.py) from there.",
                    obj=alias,
                    id=CHECK_ID.format("W036"),
                )
            )
    return messages
