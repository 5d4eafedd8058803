"""A room: a name, its database-computed slug, and when it was refreshed."""

from __future__ import annotations

from django.db import models

from astral_taskclaim.fields import DbSlugField


class Room(models.Model):
    name = models.CharField(max_length=100, unique=True)
    slug = DbSlugField(source="name", max_length=100, unique=True, blank=True)
    refresh_count = models.PositiveIntegerField(default=0)
    refreshed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name

    @property
    def refresh_key(self) -> str:
        """The claim key of this room's refresh: one per window."""
        return f"room:{self.pk}"
