from __future__ import annotations

from django.db import migrations

from astral_taskclaim.db.operations import RunMigrationSQL

__all__ = ["Migration"]


class Migration(migrations.Migration):
    initial = True
    operations = [
        RunMigrationSQL(
            "0001_slug.sql",
            reverse="0001_slug_reverse.sql",
            legacy_forward="0001_slug_pg14.sql",
            legacy_below=170000,
        ),
    ]
