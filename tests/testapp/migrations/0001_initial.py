from __future__ import annotations

from django.db import migrations, models

import astral_taskclaim.fields
import astral_taskclaim.functions


class Migration(migrations.Migration):
    initial = True

    # slug.slug() must exist before the slug field and index use it.
    dependencies = [("astral_taskclaim", "0001_slug")]

    operations = [
        migrations.CreateModel(
            name="Outbox",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("body", models.JSONField()),
            ],
        ),
        migrations.CreateModel(
            name="Room",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=100)),
                (
                    "slug",
                    astral_taskclaim.fields.DbSlugField(max_length=100, source="name"),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        astral_taskclaim.functions.Slug("name"), name="testapp_room_name_slug"
                    )
                ],
            },
        ),
    ]
