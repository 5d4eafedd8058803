from __future__ import annotations

from django.db import migrations

from astral_taskclaim.db.operations import RunMigrationSQL

__all__ = ["Migration"]


class Migration(migrations.Migration):
    """``taskclaim.follow_up``: each key's pending trailing run."""

    dependencies = [("astral_taskclaim", "0014_cron_database")]
    operations = [
        RunMigrationSQL("0015_follow_up.sql", reverse="0015_follow_up_reverse.sql"),
    ]
