from __future__ import annotations

from django.db import migrations, models

import astral_taskclaim.fields
from astral_taskclaim.db.operations import RunMigrationSQL

__all__ = ["Migration"]


class Migration(migrations.Migration):
    """The run history of claimed tasks, ``taskclaim.run`` (SQL), pruned by
    the results' cleanup function, which it extends; its model's state. The
    service role's grants are ``runs/grants.sql``, applied after ``migrate``."""

    dependencies = [("astral_taskclaim", "0009_outbox_dead_letter")]
    operations = [
        RunMigrationSQL("0010_runs.sql", reverse="0010_runs_reverse.sql"),
        migrations.CreateModel(
            name="ClaimedRun",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        help_text="The run's claim token.",
                        primary_key=True,
                        serialize=False,
                        verbose_name="run id",
                    ),
                ),
                ("task", models.TextField(verbose_name="task")),
                (
                    "queue",
                    models.TextField(help_text="The TASKCLAIM_QUEUES alias.", verbose_name="queue"),
                ),
                ("key", models.TextField(verbose_name="key")),
                (
                    "status",
                    models.TextField(
                        choices=[
                            ("RETRYING", "Retrying"),
                            ("SUCCESSFUL", "Successful"),
                            ("FAILED", "Failed"),
                        ],
                        verbose_name="status",
                    ),
                ),
                ("attempts", models.IntegerField(verbose_name="attempts")),
                ("errors", models.JSONField(default=list, verbose_name="errors")),
                ("worker_ids", models.JSONField(default=list, verbose_name="worker ids")),
                (
                    "payload",
                    models.TextField(blank=True, null=True, verbose_name="task payload"),
                ),
                (
                    "started_at",
                    astral_taskclaim.fields.LoadableDateTimeField(verbose_name="started at"),
                ),
                (
                    "last_attempted_at",
                    astral_taskclaim.fields.LoadableDateTimeField(verbose_name="last attempted at"),
                ),
                (
                    "finished_at",
                    astral_taskclaim.fields.LoadableDateTimeField(
                        blank=True, null=True, verbose_name="finished at"
                    ),
                ),
            ],
            options={
                "verbose_name": "claimed task run",
                "verbose_name_plural": "claimed task runs",
                "db_table": '"taskclaim"."run"',
                "ordering": ("-finished_at",),
                "managed": False,
            },
        ),
    ]
