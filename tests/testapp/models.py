"""Models the tests use the app's parts with."""

from __future__ import annotations

from django.db import models

from astral_taskclaim.fields import DbSlugField
from astral_taskclaim.functions import Slug


class Room(models.Model):
    """A named thing with a database-computed slug and a slug index."""

    name = models.CharField(max_length=100)
    slug = DbSlugField(source="name", max_length=100)

    class Meta:
        indexes = [models.Index(Slug("name"), name="testapp_room_name_slug")]

    def __str__(self) -> str:
        return self.name


class Outbox(models.Model):
    """Message bodies a transactional test queue writes in the caller's
    transaction (the way the PostgreSQL queue does)."""

    body = models.JSONField()

    def __str__(self) -> str:
        return f"outbox {self.pk}"
