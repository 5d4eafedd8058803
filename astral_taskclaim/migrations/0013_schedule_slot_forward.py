from __future__ import annotations

from django.db import migrations

from astral_taskclaim.db.operations import RunMigrationSQL

__all__ = ["Migration"]


class Migration(migrations.Migration):
    """``taskclaim.enqueue_schedule_slot()`` records a slot before enqueuing
    it and only when it is newer than the schedule's newest recorded slot,
    as a worker's ticker does: a worker whose clock runs ahead, having
    enqueued a slot whose claim has since expired, cannot have pg_cron
    enqueue that slot again."""

    dependencies = [("astral_taskclaim", "0012_schedule_slot")]
    operations = [
        RunMigrationSQL(
            "0013_schedule_slot_forward.sql", reverse="0013_schedule_slot_forward_reverse.sql"
        ),
    ]
