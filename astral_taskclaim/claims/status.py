"""What the app's claims and queues hold right now, for people and scripts.

:func:`collect` gathers, per ``TASKCLAIM_QUEUES`` alias, what its backend's
:meth:`~astral_taskclaim.queues.BaseQueue.status` knows (ready, delayed and
leased messages, the oldest message's age), and the claims in force and
expired in ``TASKCLAIM_DATABASE``, and the rows waiting in each
queue's transactional outbox. ``manage.py taskclaim_status`` prints
it; the Prometheus metrics read it too.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict
from typing import Any

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.not_migrated import ensure_migrated
from astral_taskclaim.core.redaction import redact_configured
from astral_taskclaim.db import sqlfiles, statements
from astral_taskclaim.queues import QueueStatus, create_queue
from astral_taskclaim.queues.outbox import outbox_status

__all__ = ["claim_counts", "collect", "queue_status"]


def claim_counts(alias: str | None = None) -> dict[str, int]:
    """``{"active": n, "expired": n}`` claims in database ``alias`` (default:
    ``TASKCLAIM_DATABASE``); :class:`~astral_taskclaim.core.not_migrated.NotMigratedError`
    before ``migrate``."""
    alias = alias or app_settings.DATABASE
    ensure_migrated(alias)
    active, expired = statements.run(alias, "taskclaim/claim_counts.sql", {})[0]
    return {"active": active, "expired": expired}


def queue_status(alias: str) -> dict[str, Any]:
    """The status of queue ``alias`` as a JSON-ready dict: its backend class,
    the :class:`~astral_taskclaim.queues.QueueStatus` fields (``None`` when
    unknown), and ``error`` (``None``, or why the backend could not be
    asked). It never raises: one queue out of reach (SQS unreachable, an
    unknown queue URL, a bad configuration) must not hide the others."""
    found: dict[str, Any] = {"backend": None, **asdict(QueueStatus()), "error": None}
    try:
        queue = create_queue(alias)
    except Exception as error:  # reported in the queue's entry
        found["error"] = f"{type(error).__name__}: {error}"
        return found
    found["backend"] = type(queue).__name__
    try:
        found.update(asdict(queue.status()))
    except Exception as error:  # reported in the queue's entry
        # The error's text may quote a credential (a DSN, a refused header).
        found["error"] = redact_configured(f"{type(error).__name__}: {error}", queue)
    finally:
        with contextlib.suppress(Exception):
            queue.close()
    return found


def collect() -> dict[str, Any]:
    """Claims and every configured queue (see the module docstring)."""
    alias = app_settings.DATABASE
    return {
        "claims": {"database": alias, **claim_counts(alias)},
        "queues": {name: queue_status(name) for name in app_settings.QUEUES},
        "outboxes": {
            found.queue: {
                "depth": found.depth,
                "depth_exact": found.depth_exact,
                "oldest_seconds": found.oldest_seconds,
                "dead": found.dead,
            }
            for found in outbox_status(using=alias)
        },
        "recent_failures": recent_failures(alias),
    }


#: Most runs :func:`recent_failures` lists.
RECENT_FAILURES = 10


def recent_failures(alias: str, *, limit: int = RECENT_FAILURES) -> list[dict[str, Any]]:
    """The latest ``limit`` runs that gave up in the last day, newest first,
    claimed tasks (``kind`` ``"claimed"``) and Django Tasks (``"django"``)
    together: ``task``, ``key``, ``id``, ``attempts``, ``age_seconds``,
    ``error_class`` and ``error_message`` (``None`` where a row has none)."""
    connector = statements.Connector(alias)
    with connector.connection.cursor() as cursor:
        cursor.execute(sqlfiles.read("runs/recent_failures.sql"), {"limit": limit})
        names = [column.name for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
