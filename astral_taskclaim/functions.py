"""``slug.slug()`` in the ORM: the :class:`Slug` function and the ``slug`` lookup.

``slug.slug(name)`` is created by the app's first migration in the claims
database (``TASKCLAIM_DATABASE``). It is immutable, so it can back a
functional index::

    class Room(models.Model):
        name = models.CharField(max_length=100)

        class Meta:
            indexes = [models.Index(Slug("name"), name="room_name_slug_idx")]

    Room.objects.filter(name__slug="room-52")  # uses room_name_slug_idx
    Room.objects.annotate(name_slug=Slug("name"))

The ``slug`` transform is registered on ``CharField`` and ``TextField`` when
the app is ready (:func:`register_lookups`).
"""

from __future__ import annotations

from django.db.models import CharField, TextField, Transform

__all__ = ["Slug", "register_lookups"]


class Slug(Transform):
    """``slug.slug(expression)``: the URL slug of a text (NFC, lowercase
    letters and digits, spaces as ``-``, everything else dropped).

    Also the ``slug`` lookup: ``filter(name__slug="room-52")``.
    """

    function = "slug.slug"
    lookup_name = "slug"
    output_field = TextField()


def register_lookups() -> None:
    """Registers ``__slug`` on ``CharField`` and ``TextField`` (and so on their
    subclasses, such as ``SlugField`` and ``EmailField``). Idempotent."""
    for field_class in (CharField, TextField):
        field_class.register_lookup(Slug)
