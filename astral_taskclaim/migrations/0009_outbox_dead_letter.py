from __future__ import annotations

from django.db import migrations, models

from astral_taskclaim.db.operations import RunMigrationSQL

__all__ = ["Migration"]


class Migration(migrations.Migration):
    """Per-row attempts, last error, available-at time and dead-letter state
    of the outbox (SQL), and its model (state only)."""

    dependencies = [("astral_taskclaim", "0008_runs_index")]
    operations = [
        RunMigrationSQL(
            "0009_outbox_dead_letter.sql", reverse="0009_outbox_dead_letter_reverse.sql"
        ),
        migrations.CreateModel(
            name="OutboxRow",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False, verbose_name="id")),
                ("queue", models.TextField(verbose_name="queue")),
                (
                    "body",
                    models.TextField(
                        help_text="The message's JSON, byte for byte.", verbose_name="body"
                    ),
                ),
                ("enqueued_at", models.DateTimeField(verbose_name="enqueued at")),
                ("attempts", models.IntegerField(default=0, verbose_name="attempts")),
                (
                    "last_error",
                    models.TextField(
                        blank=True,
                        help_text="Why its latest send failed.",
                        null=True,
                        verbose_name="last error",
                    ),
                ),
                ("available_at", models.DateTimeField(verbose_name="available at")),
                (
                    "dead_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="set aside at"),
                ),
            ],
            options={
                "verbose_name": "outbox row",
                "verbose_name_plural": "outbox rows",
                "db_table": '"taskclaim"."outbox"',
                "ordering": ("id",),
                "managed": False,
            },
        ),
    ]
