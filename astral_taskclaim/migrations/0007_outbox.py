from __future__ import annotations

from django.db import migrations

from astral_taskclaim.db.operations import RunPackageSQL


class Migration(migrations.Migration):
    """The remote queues' transactional outbox, ``taskclaim.outbox`` (SQL)."""

    dependencies = [("astral_taskclaim", "0006_task_results")]
    operations = [
        RunPackageSQL(
            "outbox/schema.sql",
            reverse="outbox/reverse.sql",
            grants="outbox/grants.sql",
        ),
    ]
