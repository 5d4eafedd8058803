"""The app's configuration: on start-up it registers the system checks, the
slug lookups, every installed app's claimed tasks and the Django Tasks
backends' queue runners."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


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
        # Django Tasks backends of the app register their queues' runners.
        from astral_taskclaim.tasks_backend import connect_backends

        connect_backends()
