"""Claim-table upkeep: deleting expired claims and the snapshot scrub."""

from __future__ import annotations

from django.db import connections, transaction

from . import sqlfiles
from .conf import app_settings


def scrub(*, using: str | None = None) -> None:
    """Empties ``taskclaim.claim``: for a copy of a database (a snapshot)
    whose queued messages stayed behind in the environment it came from."""
    alias = using or app_settings.DATABASE
    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        cursor.execute(sqlfiles.read("taskclaim/scrub.sql"))
