"""The admin of the schedules: every declared schedule and every recorded one
no longer declared (:func:`~astral_taskclaim.schedules.overview.schedule_rows`),
read-only. The list is not a changelist of ``taskclaim.schedule``, which
holds a schedule only once it enqueued a slot; a recorded schedule's page
is its row.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.text import capfirst
from django.utils.translation import gettext_lazy as _

from astral_taskclaim.admin.queries import ModelAdminOf, relative_time
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.schedules.models import ScheduleRecord
from astral_taskclaim.schedules.overview import ScheduleRow, schedule_rows


def _slot_shown(slot: datetime | None, now: datetime) -> str | None:
    """A next slot as its zone's wall clock says it, and how far off."""
    if slot is None:
        return None
    return f"{slot:%Y-%m-%d %H:%M:%S %Z} ({relative_time((slot - now).total_seconds())})"


class ScheduleAdmin(ModelAdminOf[ScheduleRecord]):
    """Every schedule, declared or recorded, with its declaration and record."""

    fields = (
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
    readonly_fields = fields
    _rows: dict[str, ScheduleRow] = {}

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """Every schedule (module docstring), at the changelist's URL."""
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        now = datetime.now(UTC)
        rows = [
            {
                "row": row,
                "url": None
                if row.record is None
                else reverse(
                    f"{self.admin_site.name}:astral_taskclaim_schedulerecord_change",
                    args=(row.name,),
                ),
                "next_slot": _slot_shown(row.next_slot(now), now),
            }
            for row in schedule_rows(alias=app_settings.DATABASE)
        ]
        context = {
            **self.admin_site.each_context(request),
            "title": capfirst(self.opts.verbose_name_plural),
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "rows": rows,
            "empty": self.get_empty_value_display(),
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/astral_taskclaim/schedules.html", context)

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> ScheduleRecord | None:
        self._rows = {row.name: row for row in schedule_rows(alias=app_settings.DATABASE)}
        return super().get_object(request, object_id, from_field)

    def _row(self, record: ScheduleRecord) -> ScheduleRow:
        return self._rows.get(record.name) or ScheduleRow(record.name, None, record)

    @admin.display(description=_("task"))
    def task(self, record: ScheduleRecord) -> str:
        declared = self._row(record).declared
        return declared.target_name if declared else str(_("(no longer declared)"))

    @admin.display(description=_("expression"))
    def expression(self, record: ScheduleRecord) -> str | None:
        return self._row(record).expression

    @admin.display(description=_("zone"))
    def zone(self, record: ScheduleRecord) -> str | None:
        return self._row(record).zone

    @admin.display(description=_("next slot"))
    def next_slot(self, record: ScheduleRecord) -> str | None:
        now = datetime.now(UTC)
        return _slot_shown(self._row(record).next_slot(now), now)

    @admin.display(description=_("enqueued by"))
    def enqueued_by(self, record: ScheduleRecord) -> str | None:
        return self._row(record).enqueued_by

    def has_change_permission(
        self, request: HttpRequest, obj: ScheduleRecord | None = None
    ) -> bool:
        return False

    def has_delete_permission(
        self, request: HttpRequest, obj: ScheduleRecord | None = None
    ) -> bool:
        return False
