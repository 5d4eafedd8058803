from __future__ import annotations

from django.db import migrations

from astral_taskclaim.db.operations import ScheduleCleanupJob

__all__ = ["Migration"]


class Migration(migrations.Migration):
    dependencies = [("astral_taskclaim", "0002_taskclaim")]
    operations = [ScheduleCleanupJob()]
