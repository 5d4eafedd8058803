from __future__ import annotations

from django.db import migrations

from astral_taskclaim.db.operations import RunPackageSQL


class Migration(migrations.Migration):
    # taskclaim does not use slug; the order only keeps one migration graph.
    dependencies = [("astral_taskclaim", "0001_slug")]
    operations = [
        RunPackageSQL(
            "taskclaim/schema.sql",
            reverse="taskclaim/reverse.sql",
            grants="taskclaim/grants.sql",
        ),
    ]
