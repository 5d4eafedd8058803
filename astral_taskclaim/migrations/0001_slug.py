from __future__ import annotations

from django.db import migrations

from astral_taskclaim.db.operations import RunPackageSQL


class Migration(migrations.Migration):
    initial = True
    operations = [
        RunPackageSQL(
            "slug/schema.sql",
            reverse="slug/reverse.sql",
            grants="slug/grants.sql",
            legacy_forward="slug/schema_fallback.sql",
            legacy_below=170000,
        ),
    ]
