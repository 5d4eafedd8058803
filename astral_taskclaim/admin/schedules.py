"""The Django admin of the schedules: each one's task, expression and zone
(from its declaration), last slot, last enqueue and its outcome (from
``taskclaim.schedule``) and next slot. Read-only: the workers write it."""

from __future__ import annotations

from datetime import UTC, datetime

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from astral_taskclaim.admin.queries import ModelAdminOf
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.schedules import Cron, Schedule, declared_schedules, slot_text
from astral_taskclaim.schedules.models import ScheduleRecord

__all__ = ["ScheduleAdmin"]


class ScheduleAdmin(ModelAdminOf[ScheduleRecord]):
    """Schedules that enqueued a slot, with their declarations."""

    list_display = (
        "name",
        "task",
        "expression",
        "zone",
        "last_slot",
        "enqueued_at",
        "next_slot",
        "outcome",
        "slots",
    )
    fields = list_display
    readonly_fields = fields
    _declared: dict[str, Schedule] | None = None

    def get_queryset(self, request: HttpRequest) -> QuerySet[ScheduleRecord]:
        self._declared = {s.name: s for s in declared_schedules()}
        return super().get_queryset(request).using(app_settings.DATABASE)

    def _schedule(self, record: ScheduleRecord) -> Schedule | None:
        return (self._declared or {}).get(record.name)

    @admin.display(description=_("task"))
    def task(self, record: ScheduleRecord) -> str:
        found = self._schedule(record)
        return found.target_name if found else "(no longer declared)"

    @admin.display(description=_("expression"))
    def expression(self, record: ScheduleRecord) -> str:
        found = self._schedule(record)
        if found is None:
            return "-"
        timing = found.timing
        return timing.expression if isinstance(timing, Cron) else timing.describe()

    @admin.display(description=_("zone"))
    def zone(self, record: ScheduleRecord) -> str:
        found = self._schedule(record)
        timing = found.timing if found else None
        return timing.zone_name if isinstance(timing, Cron) else "UTC"

    @admin.display(description=_("next slot"))
    def next_slot(self, record: ScheduleRecord) -> str:
        found = self._schedule(record)
        return slot_text(found.timing.after(datetime.now(UTC))) if found else "-"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: ScheduleRecord | None = None
    ) -> bool:
        return False

    def has_delete_permission(
        self, request: HttpRequest, obj: ScheduleRecord | None = None
    ) -> bool:
        return False
