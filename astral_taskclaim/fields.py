"""The app's model fields: :class:`DbSlugField`, a slug the database fills
in, and :class:`LoadableDateTimeField`, a timestamp that loads whatever
value a row holds (see its docstring).

:class:`DbSlugField` is a ``SlugField`` whose value, when left blank (``""``
or ``None``) on save, is computed by PostgreSQL as ``slug.slug(<source>)`` in
the same INSERT or UPDATE, so Python and SQL never disagree on a slug::

    class Room(models.Model):
        name = models.CharField(max_length=100)
        slug = DbSlugField(source="name", max_length=100, unique=True)

    room = Room.objects.create(name="Room 52")
    room.slug  # "room-52"

The computed value is on the instance after ``save()``:

- INSERT (``save()``, ``create()``, ``bulk_create()``): returned by the
  statement itself (``RETURNING``), on every supported Django version.
- UPDATE: Django 6.0 and later return it from the UPDATE too. Django 5.2
  cannot, so the field reads it back with one extra query after the save
  (``refresh_from_db(fields=[...])``).

An explicit value is kept, and a slug is not recomputed when the source
changes later: set it to ``""`` to have it computed again. ``bulk_update()``
and ``QuerySet.update()`` write what they are given (use
``update(slug=Slug("name"))`` to recompute in bulk).
"""

from __future__ import annotations

from typing import Any

import django
from django.core import checks
from django.db import models
from django.db.models.signals import post_save

from astral_taskclaim.functions import Slug

__all__ = [
    "DbSlugField",
    "LoadableDateTimeField",
]

# Django 6.0 added RETURNING to the UPDATE of save() for fields whose value is
# an expression; before it, the computed slug must be read back.
_UPDATE_RETURNS_EXPRESSIONS = django.VERSION >= (6, 0)

# Instance attribute listing the fields to read back after a 5.2 UPDATE.
_PENDING = "_astral_taskclaim_pending_slugs"


class DbSlugField(models.SlugField):  # type: ignore[type-arg]
    """A ``SlugField`` computed as ``slug.slug(<source>)`` by the database
    when left blank.

    ``source`` names the model field to slug (default ``"name"``). The field
    is ``blank=True`` by default, so forms (and the admin) may leave it empty;
    give ``max_length`` at least the source's.
    """

    description = "Slug computed by slug.slug() from another field when left blank"

    def __init__(self, *args: Any, source: str = "name", **kwargs: Any) -> None:
        if not isinstance(source, str) or not source:
            raise TypeError(f"source must be a field name, got {source!r}")
        self.source = source
        kwargs.setdefault("blank", True)
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        kwargs["source"] = self.source
        if self.blank:
            kwargs.pop("blank", None)
        else:
            kwargs["blank"] = False
        return name, path, args, kwargs

    @property
    def db_returning(self) -> bool:  # type: ignore[override]
        # Every INSERT (save, create, bulk_create) returns the stored slug.
        return True

    def contribute_to_class(
        self, cls: type[models.Model], name: str, private_only: bool = False
    ) -> None:
        super().contribute_to_class(cls, name, private_only=private_only)
        if not _UPDATE_RETURNS_EXPRESSIONS and not cls._meta.abstract:
            post_save.connect(_read_back_pending, sender=cls, weak=False)

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        value = getattr(model_instance, self.attname)
        if not _UPDATE_RETURNS_EXPRESSIONS:
            # Only an UPDATE that computes the slug needs reading back (an
            # UPDATE matching no row is followed by an INSERT, which returns it).
            pending: set[str] = model_instance.__dict__.setdefault(_PENDING, set())
            pending.discard(self.attname)
        if hasattr(value, "resolve_expression") or value not in (None, ""):
            return value
        # The source's new value, not its column: in an UPDATE the column
        # would still hold the old name.
        source = getattr(model_instance, self._source_field().attname)
        if not hasattr(source, "resolve_expression"):
            source = models.Value(source, output_field=models.TextField())
        if not add and not _UPDATE_RETURNS_EXPRESSIONS:
            pending.add(self.attname)
        return Slug(source)

    def _source_field(self) -> models.Field[Any, Any]:
        field = self.model._meta.get_field(self.source)
        assert isinstance(field, models.Field)  # checked by check()
        return field

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        return [*super().check(**kwargs), *self._check_source()]

    def _check_source(self) -> list[checks.CheckMessage]:
        try:
            source = self.model._meta.get_field(self.source)
        except Exception:
            source = None
        if not isinstance(source, models.CharField | models.TextField) or source is self:
            return [
                checks.Error(
                    f"DbSlugField source {self.source!r} is not a text field of "
                    f"{self.model._meta.label}.",
                    hint="Point source at a CharField or TextField of the same model.",
                    obj=self,
                    id="astral_taskclaim.E020",
                )
            ]
        if source.max_length and self.max_length and self.max_length < source.max_length:
            return [
                checks.Warning(
                    f"DbSlugField max_length {self.max_length} is less than its source "
                    f"{self.source!r} ({source.max_length}): a long name's slug would not fit.",
                    hint=f"Give the slug max_length={source.max_length} or more.",
                    obj=self,
                    id="astral_taskclaim.W021",
                )
            ]
        return []


def _read_back_pending(sender: type[models.Model], instance: models.Model, **kwargs: Any) -> None:
    """After a Django 5.2 UPDATE, reads the slugs the database computed."""
    pending = instance.__dict__.pop(_PENDING, None)
    if pending and not kwargs.get("raw"):
        instance.refresh_from_db(using=kwargs.get("using"), fields=sorted(pending))


#: What :class:`LoadableDateTimeField` loads in place of a value Python's
#: ``datetime`` cannot hold. A day inside ``datetime.min``/``max``, so the
#: value stays a ``datetime`` in any connection time zone (offsets stay
#: under 16 hours).
_EARLIEST_LOADABLE = "0001-01-02 00:00:00+00"
_LATEST_LOADABLE = "9999-12-30 00:00:00+00"


class LoadableDateTimeField(models.DateTimeField):  # type: ignore[type-arg]
    """A ``DateTimeField`` whose column may hold what Python cannot load.

    ``timestamptz`` admits ``'infinity'``, ``'-infinity'`` and years past
    9999; psycopg refuses to load those, so one such row (a claim pinned
    "forever" by hand, a row written by another client) would make every
    query that reads it fail. This field selects the column clamped into
    ``[_EARLIEST_LOADABLE, _LATEST_LOADABLE]``: ``'infinity'`` loads as
    9999-12-30 UTC, ``'-infinity'`` as 0001-01-02 UTC. Filters and ordering
    use the column itself, so they see the true value; NULL stays NULL.
    """

    def select_format(self, compiler: Any, sql: str, params: Any) -> tuple[str, Any]:
        sql, params = super().select_format(compiler, sql, params)
        # Not GREATEST/LEAST, which skip a NULL: a nullable column stays NULL.
        clamped = (
            f"CASE WHEN {sql} > '{_LATEST_LOADABLE}'::timestamptz THEN '{_LATEST_LOADABLE}'"
            f"::timestamptz WHEN {sql} < '{_EARLIEST_LOADABLE}'::timestamptz THEN "
            f"'{_EARLIEST_LOADABLE}'::timestamptz ELSE {sql} END"
        )
        return clamped, (*params, *params, *params)
