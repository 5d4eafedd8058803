"""The base of the models over the tables the app's SQL owns.

``taskclaim.claim``, ``taskclaim.message`` and ``taskclaim.task_result`` are
created by the app's SQL migrations (:mod:`.operations`), with the grants,
triggers and functions the SQL needs; Django reads and writes them through
models but must never create or alter them. :class:`SqlOwnedModel` says so
once: its models are unmanaged, and each gives only its table and names::

    class Claim(SqlOwnedModel):
        ...

        class Meta(SqlOwnedModel.Meta):
            db_table = '"taskclaim"."claim"'
            verbose_name = _("claim")
            ...
"""

from __future__ import annotations

from django.db import models

__all__ = ["SqlOwnedModel"]


class SqlOwnedModel(models.Model):
    """An unmanaged model over a table of schema ``taskclaim`` that the app's
    SQL migrations create and own. Django's migrations record its fields
    but never change the table; ``makemigrations`` has nothing to write
    when a field's Python side changes."""

    class Meta:
        abstract = True
        managed = False
