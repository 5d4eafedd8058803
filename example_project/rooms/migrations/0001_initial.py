from __future__ import annotations

from django.db import migrations, models

import astral_taskclaim.fields


class Migration(migrations.Migration):
    initial = True

    # slug.slug(), which fills Room.slug, comes from astral_taskclaim's first migration.
    dependencies = [
        ("astral_taskclaim", "0001_slug"),
    ]

    operations = [
        migrations.CreateModel(
            name="Room",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=100, unique=True)),
                (
                    "slug",
                    astral_taskclaim.fields.DbSlugField(max_length=100, source="name", unique=True),
                ),
                ("refresh_count", models.PositiveIntegerField(default=0)),
                ("refreshed_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "ordering": ("name",),
            },
        ),
    ]
