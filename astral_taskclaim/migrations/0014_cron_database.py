from __future__ import annotations

from django.db import migrations

from astral_taskclaim.db.operations import RunMigrationSQL

__all__ = ["Migration"]


class Migration(migrations.Migration):
    """``taskclaim.cron_database()`` reads pg_cron's database (a setting only
    superusers and ``pg_read_all_settings`` may read) as its owner, so a
    least-privilege service role can run the worker's schedules and
    ``taskclaim_status`` where pg_cron is loaded."""

    dependencies = [("astral_taskclaim", "0013_schedule_slot_forward")]
    operations = [
        RunMigrationSQL("0014_cron_database.sql", reverse="0014_cron_database_reverse.sql"),
    ]
