from __future__ import annotations

from django.db import migrations, models

import astral_taskclaim.fields
from astral_taskclaim.db.operations import RunMigrationSQL

__all__ = ["Migration"]


class Migration(migrations.Migration):
    """The last slot each schedule enqueued, ``taskclaim.schedule`` (SQL,
    and its model's state)."""

    dependencies = [("astral_taskclaim", "0010_runs")]
    operations = [
        RunMigrationSQL("0011_schedule.sql", reverse="0011_schedule_reverse.sql"),
        migrations.CreateModel(
            name="ScheduleRecord",
            fields=[
                (
                    "name",
                    models.TextField(primary_key=True, serialize=False, verbose_name="schedule"),
                ),
                (
                    "last_slot",
                    astral_taskclaim.fields.LoadableDateTimeField(verbose_name="last slot"),
                ),
                (
                    "enqueued_at",
                    astral_taskclaim.fields.LoadableDateTimeField(verbose_name="last enqueue"),
                ),
                ("outcome", models.TextField(verbose_name="outcome")),
                ("slots", models.BigIntegerField(verbose_name="slots enqueued")),
            ],
            options={
                "verbose_name": "schedule",
                "verbose_name_plural": "schedules",
                "db_table": '"taskclaim"."schedule"',
                "ordering": ("name",),
                "managed": False,
            },
        ),
    ]
