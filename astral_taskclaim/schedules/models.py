"""The Django model over ``taskclaim.schedule`` (the last slot of each schedule)."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from astral_taskclaim.db.sql_owned import SqlOwnedModel
from astral_taskclaim.fields import LoadableDateTimeField


class ScheduleRecord(SqlOwnedModel):
    """What a schedule's newest slot did. Unmanaged: the schedules' SQL
    owns the table and the workers write it."""

    name = models.TextField(_("schedule"), primary_key=True)
    last_slot = LoadableDateTimeField(_("last slot"))
    enqueued_at = LoadableDateTimeField(_("last enqueue"))
    outcome = models.TextField(_("outcome"))
    slots = models.BigIntegerField(_("slots enqueued"))

    class Meta(SqlOwnedModel.Meta):
        db_table = '"taskclaim"."schedule"'
        verbose_name = _("schedule")
        verbose_name_plural = _("schedules")
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name
