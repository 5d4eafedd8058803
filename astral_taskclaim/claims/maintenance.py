"""Claim-table upkeep: deleting expired claims and the snapshot scrub."""

from __future__ import annotations

import logging

from django.db import transaction

from astral_taskclaim.claims.writing import resolve_alias
from astral_taskclaim.db.statements import Connector

__all__ = ["delete_expired", "scrub"]

logger = logging.getLogger(__name__)


def scrub(*, using: str | None = None) -> None:
    """Empties ``taskclaim.claim``: for a copy of a database (a snapshot)
    whose queued messages stayed behind in the environment it came from."""
    alias = resolve_alias(using)
    with transaction.atomic(using=alias):
        Connector(alias).execute("taskclaim/scrub.sql")


def delete_expired(*, batch_size: int = 1000, using: str | None = None) -> int:
    """Deletes expired claims, ``batch_size`` at a time, and returns how many.

    For deployments without pg_cron (what ``taskclaim.delete_expired()``
    does in one statement). Each batch is its own transaction and skips
    rows a claim is writing, so claimers never wait long on the cleanup;
    claims that expire while it runs may be left for the next run.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise TypeError(f"batch_size must be an int, got {type(batch_size).__name__}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be 1 or more, got {batch_size}")
    alias = resolve_alias(using)
    connector = Connector(alias)
    total = 0
    while True:
        with transaction.atomic(using=alias):
            deleted = connector.execute(
                "taskclaim/delete_expired_batch.sql", {"batch_size": batch_size}
            )
        total += deleted
        logger.debug(
            "deleted %d expired claims",
            deleted,
            extra={"event": "taskclaim.expired_deleted", "deleted": deleted},
        )
        if deleted < batch_size:
            return total
