"""The app's configuration: on start-up it registers the system checks, the
slug lookups, every installed app's claimed tasks and the Django Tasks
backends' queue runners; after every ``migrate`` it applies what the
migrations must not bake in, because it follows settings that may change
(:func:`after_migrate`)."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.core.signals import setting_changed
from django.db import connections
from django.db.models.signals import post_migrate
from django.utils.translation import gettext_lazy as _

from astral_taskclaim.core.conf import app_settings


def after_migrate(using: str, plan: list[Any] | None = None, **kwargs: Any) -> None:
    """``post_migrate`` handler: applies, with the settings in force now,
    what follows settings and so is no part of a migration: the service
    role's grants on the applied migrations' objects
    (:mod:`astral_taskclaim.db.grants`) and the results cleanup job with
    the current retention, or its removal once the results table is gone
    (:mod:`astral_taskclaim.tasks_backend.retention`), and the pg_cron jobs
    of the in-database schedules declared now, those of schedules gone
    removed (:mod:`astral_taskclaim.schedules.in_database`). Only after
    ``migrate`` on the claims database: ``flush`` (run between transactional
    tests) sends the signal without a plan, and changes nothing these follow."""
    from astral_taskclaim.db.grants import applied_migrations, apply_grants
    from astral_taskclaim.schedules import in_database
    from astral_taskclaim.tasks_backend import retention

    if plan is None or using != app_settings.DATABASE:
        return
    connection = connections[using]
    apply_grants(connection)
    applied = applied_migrations(connection)
    if "0006_task_results" in applied:
        retention.schedule_job(connection, quiet=True)
    else:
        retention.unschedule_job(connection)
    if "0012_schedule_slot" in applied:
        in_database.schedule_jobs(connection, quiet=True)
    else:
        in_database.unschedule_jobs(connection)


class TaskClaimConfig(AppConfig):
    name = "astral_taskclaim"
    label = "astral_taskclaim"
    verbose_name = _("Task claims")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here, not at the top: these modules use the models and
        # settings, which Django loads after it has imported this AppConfig.
        from astral_taskclaim import checks  # noqa: F401  (registers the system checks)
        from astral_taskclaim.functions import register_lookups

        register_lookups()
        # Registers the claimed tasks of every installed app's tasks module.
        from astral_taskclaim.tasks import autodiscover

        autodiscover()
        # The runners of the queues the app's Django Tasks backends send to,
        # set again whenever the settings they follow change (tests).
        from astral_taskclaim.tasks_backend import register_runners

        register_runners()
        setting_changed.connect(register_runners, dispatch_uid="astral_taskclaim.runners")
        post_migrate.connect(after_migrate, sender=self, dispatch_uid="astral_taskclaim")
