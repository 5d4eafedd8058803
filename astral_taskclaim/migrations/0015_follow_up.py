from __future__ import annotations

from django.db import migrations, models

import astral_taskclaim.fields
from astral_taskclaim.db.operations import RunMigrationSQL

__all__ = ["Migration"]


class Migration(migrations.Migration):
    """``taskclaim.follow_up``: each key's pending trailing run."""

    dependencies = [("astral_taskclaim", "0014_cron_database")]
    operations = [
        RunMigrationSQL("0015_follow_up.sql", reverse="0015_follow_up_reverse.sql"),
        migrations.CreateModel(
            name="FollowUp",
            fields=[
                (
                    "token",
                    models.UUIDField(primary_key=True, serialize=False, verbose_name="token"),
                ),
                ("key", models.TextField(verbose_name="key")),
                ("task", models.TextField(verbose_name="task")),
                ("window_seconds", models.FloatField(verbose_name="window (seconds)")),
                (
                    "created_at",
                    astral_taskclaim.fields.LoadableDateTimeField(verbose_name="first trigger"),
                ),
                (
                    "updated_at",
                    astral_taskclaim.fields.LoadableDateTimeField(verbose_name="latest write"),
                ),
                (
                    "taken_at",
                    astral_taskclaim.fields.LoadableDateTimeField(
                        blank=True, null=True, verbose_name="run started"
                    ),
                ),
                (
                    "debounce_seconds",
                    models.FloatField(blank=True, null=True, verbose_name="debounce (seconds)"),
                ),
                (
                    "max_wait_seconds",
                    models.FloatField(blank=True, null=True, verbose_name="maximum wait (seconds)"),
                ),
            ],
            options={
                "verbose_name": "follow-up run",
                "verbose_name_plural": "follow-up runs",
                "db_table": '"taskclaim"."follow_up"',
                "ordering": ("created_at",),
                "managed": False,
            },
        ),
    ]
