from __future__ import annotations

from django.db import migrations, models

__all__ = ["Migration"]


class Migration(migrations.Migration):
    """State only: the table comes from 0002's SQL."""

    dependencies = [("astral_taskclaim", "0003_taskclaim_jobs")]
    operations = [
        migrations.CreateModel(
            name="Claim",
            fields=[
                ("key", models.TextField(primary_key=True, serialize=False, verbose_name="key")),
                ("expires_at", models.DateTimeField(verbose_name="expires at")),
                ("token", models.UUIDField(verbose_name="token")),
            ],
            options={
                "verbose_name": "claim",
                "verbose_name_plural": "claims",
                "db_table": '"taskclaim"."claim"',
                "ordering": ("expires_at",),
                "managed": False,
            },
        ),
    ]
