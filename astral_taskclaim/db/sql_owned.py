"""The base of the models over the tables the app's SQL owns.

The SQL migrations (:mod:`.operations`) create ``taskclaim.claim``,
``taskclaim.message`` and ``taskclaim.task_result`` with their grants,
triggers and functions; Django must never create or alter them, so
:class:`SqlOwnedModel`'s models are unmanaged and give only table and names.
:class:`SqlOwnedMessage` holds the first columns that the PostgreSQL
queue's ``taskclaim.message`` and the outbox's ``taskclaim.outbox`` share.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import models
from django.utils.translation import gettext_lazy as _


class SqlOwnedModel(models.Model):
    """An unmanaged model over a table of schema ``taskclaim`` that the app's
    SQL migrations create and own. Django's migrations record its fields
    but never change the table; ``makemigrations`` has nothing to write
    when a field's Python side changes."""

    class Meta:
        abstract = True
        managed = False


class SqlOwnedMessage(SqlOwnedModel):
    """A message table of the app's SQL: its first columns, an ``id``, the
    ``queue`` and the JSON ``body`` byte for byte, and the body decoded."""

    id = models.BigAutoField(_("id"), primary_key=True)
    queue = models.TextField(_("queue"))
    body = models.TextField(_("body"), help_text=_("The message's JSON, byte for byte."))

    class Meta(SqlOwnedModel.Meta):
        abstract = True

    def __str__(self) -> str:
        return f"{self.queue} #{self.pk}"

    @property
    def payload(self) -> Any:
        """The body decoded from JSON."""
        return json.loads(self.body)


def error_objects(errors: object) -> list[dict[str, Any]]:
    """The objects of a stored ``errors`` JSON list, in order: what else a
    row holds (a list of strings, a number, ``null``) is left out, so an
    odd row cannot break the admin's pages."""
    if not isinstance(errors, list):
        return []
    return [error for error in errors if isinstance(error, dict)]
