from __future__ import annotations

from django.db import migrations

from astral_taskclaim.db.operations import RunMigrationSQL

__all__ = ["Migration"]


class Migration(migrations.Migration):
    """``taskclaim.enqueue_schedule_slot()``: a schedule's slot enqueued
    inside the database, which the pg_cron jobs of schedules declared
    ``in_database=True`` call (scheduled after every ``migrate``)."""

    dependencies = [("astral_taskclaim", "0011_schedule")]
    operations = [
        RunMigrationSQL("0012_schedule_slot.sql", reverse="0012_schedule_slot_reverse.sql"),
    ]
