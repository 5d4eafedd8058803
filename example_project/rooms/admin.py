"""Rooms in the admin, with a "refresh" action that enqueues claimed tasks."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from .models import Room
from .tasks import refresh_room


@admin.register(Room)
class RoomAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "refresh_count", "refreshed_at")
    search_fields = ("name", "slug")
    readonly_fields = ("refresh_count", "refreshed_at")
    actions = ("refresh",)

    @admin.action(description="Refresh the selected rooms")
    def refresh(self, request: HttpRequest, queryset: QuerySet[Room]) -> None:
        tokens = [refresh_room.enqueue(room.refresh_key, {"room": room.pk}) for room in queryset]
        sent = sum(token is not None for token in tokens)
        skipped = len(tokens) - sent
        self.message_user(
            request,
            f"{sent} refresh(es) queued, {skipped} already queued in their window.",
            messages.SUCCESS,
        )
