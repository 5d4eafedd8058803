from __future__ import annotations

from django.db import migrations, models

from astral_taskclaim.db.operations import RunMigrationSQL

__all__ = ["Migration"]


class Migration(migrations.Migration):
    """Django Tasks: the results table, message priority and last error
    (SQL, models state only). The results' pg_cron cleanup follows a setting,
    so it is scheduled after each ``migrate``, not here."""

    dependencies = [("astral_taskclaim", "0005_queue")]
    operations = [
        RunMigrationSQL("0006_task_results.sql", reverse="0006_task_results_reverse.sql"),
        migrations.AddField(
            model_name="queuemessage",
            name="priority",
            field=models.SmallIntegerField(default=0, verbose_name="priority"),
        ),
        migrations.AddField(
            model_name="queuemessage",
            name="last_error",
            field=models.TextField(
                blank=True,
                help_text="The error its latest retry followed.",
                null=True,
                verbose_name="last error",
            ),
        ),
        migrations.CreateModel(
            name="StoredTaskResult",
            fields=[
                ("id", models.UUIDField(primary_key=True, serialize=False, verbose_name="id")),
                ("task_path", models.TextField(verbose_name="task")),
                ("backend", models.TextField(verbose_name="backend")),
                ("queue_name", models.TextField(verbose_name="queue name")),
                (
                    "queue",
                    models.TextField(help_text="The TASKCLAIM_QUEUES alias.", verbose_name="queue"),
                ),
                ("priority", models.SmallIntegerField(default=0, verbose_name="priority")),
                (
                    "run_after",
                    models.DateTimeField(blank=True, null=True, verbose_name="run after"),
                ),
                ("key", models.TextField(blank=True, null=True, verbose_name="key")),
                (
                    "status",
                    models.TextField(
                        choices=[
                            ("READY", "Ready"),
                            ("RUNNING", "Running"),
                            ("FAILED", "Failed"),
                            ("SUCCESSFUL", "Successful"),
                        ],
                        default="READY",
                        verbose_name="status",
                    ),
                ),
                ("args", models.JSONField(default=list, verbose_name="args")),
                ("kwargs", models.JSONField(default=dict, verbose_name="kwargs")),
                (
                    "return_value",
                    models.JSONField(blank=True, null=True, verbose_name="return value"),
                ),
                ("errors", models.JSONField(default=list, verbose_name="errors")),
                ("worker_ids", models.JSONField(default=list, verbose_name="worker ids")),
                ("enqueued_at", models.DateTimeField(verbose_name="enqueued at")),
                (
                    "started_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="started at"),
                ),
                (
                    "last_attempted_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="last attempted at"),
                ),
                (
                    "finished_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="finished at"),
                ),
            ],
            options={
                "verbose_name": "task result",
                "verbose_name_plural": "task results",
                "db_table": '"taskclaim"."task_result"',
                "ordering": ("-enqueued_at",),
                "managed": False,
            },
        ),
    ]
