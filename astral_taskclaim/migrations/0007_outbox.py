from __future__ import annotations

from django.db import migrations

from astral_taskclaim.db.operations import RunMigrationSQL

__all__ = ["Migration"]


class Migration(migrations.Migration):
    """The remote queues' transactional outbox, ``taskclaim.outbox`` (SQL)."""

    dependencies = [("astral_taskclaim", "0006_task_results")]
    operations = [
        RunMigrationSQL("0007_outbox.sql", reverse="0007_outbox_reverse.sql"),
    ]
