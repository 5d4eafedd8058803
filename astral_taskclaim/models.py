"""Django's view of ``taskclaim.claim`` (created by the app's SQL migrations)."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _


class ClaimQuerySet(models.QuerySet["Claim"]):
    """Claims by state, judged by the database clock like the SQL itself."""

    def active(self) -> ClaimQuerySet:
        """Claims whose window has not ended: their key cannot be claimed."""
        return self.filter(expires_at__gte=Now())

    def expired(self) -> ClaimQuerySet:
        """Claims past their window, which ``delete_expired()`` removes."""
        return self.filter(expires_at__lt=Now())


class Claim(models.Model):
    """One task key's claim. Unmanaged: the app's SQL owns the table, and
    claims are written by :func:`astral_taskclaim.claim_task` and friends."""

    key = models.TextField(_("key"), primary_key=True)
    expires_at = models.DateTimeField(_("expires at"))
    token = models.UUIDField(_("token"))

    objects = ClaimQuerySet.as_manager()

    class Meta:
        managed = False
        db_table = '"taskclaim"."claim"'
        verbose_name = _("claim")
        verbose_name_plural = _("claims")
        ordering = ("expires_at",)

    def __str__(self) -> str:
        return self.key

    @property
    def is_active(self) -> bool:
        """Whether the claim still holds its key (by this process's clock)."""
        from django.utils import timezone

        return self.expires_at >= timezone.now()
