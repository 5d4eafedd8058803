from __future__ import annotations

from django.db import migrations

from astral_taskclaim.db.operations import RunMigrationSQL

__all__ = ["Migration"]


class Migration(migrations.Migration):
    # taskclaim does not use slug; the order only keeps one migration graph.
    dependencies = [("astral_taskclaim", "0001_slug")]
    operations = [
        RunMigrationSQL("0002_taskclaim.sql", reverse="0002_taskclaim_reverse.sql"),
    ]
