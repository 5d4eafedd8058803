from __future__ import annotations

from django.db import migrations, models

from astral_taskclaim.db.operations import RunMigrationSQL

__all__ = ["Migration"]


class Migration(migrations.Migration):
    """The PostgreSQL queue's table (SQL) and its model (state only)."""

    dependencies = [("astral_taskclaim", "0004_claim")]
    operations = [
        RunMigrationSQL("0005_queue.sql", reverse="0005_queue_reverse.sql"),
        migrations.CreateModel(
            name="QueueMessage",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False, verbose_name="id")),
                ("queue", models.TextField(verbose_name="queue")),
                (
                    "body",
                    models.TextField(
                        help_text="The message's JSON, byte for byte.", verbose_name="body"
                    ),
                ),
                ("attempts", models.IntegerField(default=0, verbose_name="attempts")),
                ("enqueued_at", models.DateTimeField(verbose_name="enqueued at")),
                ("visible_at", models.DateTimeField(verbose_name="visible at")),
                ("lease", models.UUIDField(blank=True, null=True, verbose_name="lease")),
                (
                    "leased_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="leased at"),
                ),
            ],
            options={
                "verbose_name": "queue message",
                "verbose_name_plural": "queue messages",
                "db_table": '"taskclaim"."message"',
                "ordering": ("visible_at", "id"),
                "managed": False,
            },
        ),
    ]
