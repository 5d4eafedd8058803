from __future__ import annotations

from django.db import migrations

from astral_taskclaim.db.operations import RunMigrationSQL

__all__ = ["Migration"]


class Migration(migrations.Migration):
    """An index of the task results waiting for a retry, for the overview's
    chart of runs by outcome."""

    dependencies = [("astral_taskclaim", "0007_outbox")]
    operations = [RunMigrationSQL("0008_runs_index.sql", reverse="0008_runs_index_reverse.sql")]
