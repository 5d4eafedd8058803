"""The Django admin of the schedules: each one's task, expression and zone
(from its declaration), last slot, last enqueue and its outcome (from
``taskclaim.schedule``), next slot, and who enqueues its slots (the
workers, or the pg_cron job of an in-database schedule). Read-only: the
workers (or that job) write it."""

from __future__ import annotations

from datetime import UTC, datetime

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from astral_taskclaim.admin.queries import ModelAdminOf
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.schedules import Cron, Schedule, declared_schedules, slot_text
from astral_taskclaim.schedules.in_database import run_by_pg_cron
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
        "enqueued_by",
    )
    fields = list_display
    readonly_fields = fields
    _declared: dict[str, Schedule] | None = None
    _by_pg_cron: set[str] = set()

    def get_queryset(self, request: HttpRequest) -> QuerySet[ScheduleRecord]:
        self._declared = {s.name: s for s in declared_schedules()}
        self._by_pg_cron = run_by_pg_cron(list(self._declared.values()), app_settings.DATABASE)
        return super().get_queryset(request)

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

    @admin.display(description=_("enqueued by"))
    def enqueued_by(self, record: ScheduleRecord) -> str:
        if self._schedule(record) is None:
            return "-"
        return "pg_cron" if record.name in self._by_pg_cron else "workers"

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
