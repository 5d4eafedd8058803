from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class TaskClaimConfig(AppConfig):
    name = "astral_taskclaim"
    label = "astral_taskclaim"
    verbose_name = _("Task claims")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .functions import register_lookups

        register_lookups()
        # Registers the claimed tasks of every installed app's tasks module.
        from .tasks import autodiscover

        autodiscover()
        # Django Tasks backends of the app register their queues' runners.
        from .tasks_backend import connect_backends

        connect_backends()
