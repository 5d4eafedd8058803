from __future__ import annotations

from django.db import migrations

from astral_taskclaim.db.operations import RunPackageSQL


class Migration(migrations.Migration):
    """The last slot each schedule enqueued, ``taskclaim.schedule`` (SQL)."""

    dependencies = [("astral_taskclaim", "0008_runs_index")]
    operations = [
        RunPackageSQL(
            "schedule/schema.sql", reverse="schedule/reverse.sql", grants="schedule/grants.sql"
        ),
    ]
