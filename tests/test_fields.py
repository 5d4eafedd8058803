"""DbSlugField: slugs computed by slug.slug() in the same INSERT or UPDATE."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import checks
from django.core.management import call_command
from django.db import connection, models
from django.test import Client
from django.test.utils import isolate_apps
from pytest_django import DjangoAssertNumQueries

from astral_taskclaim.fields import _UPDATE_RETURNS_EXPRESSIONS, DbSlugField
from tests.testapp.models import Room

pytestmark = pytest.mark.django_db

# Django 5.2 reads a slug computed by an UPDATE back with one more query.
UPDATE_QUERIES = 1 if _UPDATE_RETURNS_EXPRESSIONS else 2


def stored_slug(room: Room) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT slug FROM testapp_room WHERE id = %s", [room.pk])
        row = cursor.fetchone()
    assert row is not None
    return str(row[0])


def test_create_computes_the_slug_in_the_insert(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    with django_assert_num_queries(1) as captured:
        room = Room.objects.create(name="Room 52")
    assert room.slug == "room-52"
    assert stored_slug(room) == "room-52"
    assert "slug.slug(" in captured.captured_queries[0]["sql"]


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("O'Brien", "obrien"),
        ("  Two  spaces ", "--two--spaces-"),
        ("Ça va? Très bien!", "ça-va-très-bien"),
        ("Cafe\u0301 Noir", "café-noir"),  # decomposed: NFC first
        ("Straße 12", "straße-12"),
        ("!!!", ""),
    ],
)
def test_the_slug_is_what_sql_computes(name: str, slug: str) -> None:
    room = Room.objects.create(name=name)
    assert room.slug == slug
    with connection.cursor() as cursor:
        cursor.execute("SELECT slug.slug(%s)", [name])
        assert cursor.fetchone() == (slug,)


def test_an_explicit_slug_is_kept() -> None:
    room = Room.objects.create(name="Room 52", slug="the-big-one")
    assert room.slug == "the-big-one"
    assert stored_slug(room) == "the-big-one"


def test_none_counts_as_blank() -> None:
    room = Room(name="Room 52", slug=None)
    room.save()
    assert room.slug == "room-52"


def test_a_blanked_slug_is_recomputed_from_the_new_name_in_the_update(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    room = Room.objects.create(name="Room 52")
    room.name = "Hall 7"
    room.slug = ""
    with django_assert_num_queries(UPDATE_QUERIES):
        room.save()
    assert room.slug == "hall-7"
    assert stored_slug(room) == "hall-7"


def test_a_kept_slug_is_not_recomputed_when_the_name_changes() -> None:
    room = Room.objects.create(name="Room 52")
    room.name = "Hall 7"
    room.save()
    assert room.slug == "room-52"
    assert stored_slug(room) == "room-52"


def test_update_fields_without_the_slug_leaves_it() -> None:
    room = Room.objects.create(name="Room 52")
    room.name = "Hall 7"
    room.slug = ""
    room.save(update_fields=["name"])
    assert stored_slug(room) == "room-52"


def test_a_save_with_a_new_primary_key_inserts_with_the_slug() -> None:
    room = Room(pk=987_654, name="Fresh Room")
    room.save()
    assert room.slug == "fresh-room"
    assert stored_slug(room) == "fresh-room"


def test_bulk_create_returns_the_computed_slugs(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    rooms = [Room(name="Room A"), Room(name="Room B", slug="kept"), Room(name="Room C")]
    with django_assert_num_queries(1):
        created = Room.objects.bulk_create(rooms)
    assert [room.slug for room in created] == ["room-a", "kept", "room-c"]
    assert [stored_slug(room) for room in created] == ["room-a", "kept", "room-c"]


def test_the_admin_computes_a_slug_left_blank(admin_client: Client) -> None:
    response = admin_client.post(
        "/admin/testapp/room/add/", {"name": "Room 52", "slug": ""}, follow=False
    )
    assert response.status_code == 302, response.content
    room = Room.objects.get()
    assert room.slug == "room-52"
    response = admin_client.post(
        f"/admin/testapp/room/{room.pk}/change/", {"name": "Hall 7", "slug": ""}
    )
    assert response.status_code == 302
    assert stored_slug(room) == "hall-7"
    response = admin_client.post(
        f"/admin/testapp/room/{room.pk}/change/", {"name": "Hall 8", "slug": "custom"}
    )
    assert response.status_code == 302
    assert stored_slug(room) == "custom"
    assert User.objects.filter(is_superuser=True).exists()


def test_the_form_field_is_optional() -> None:
    field = Room._meta.get_field("slug")
    assert field.blank is True
    assert field.formfield().required is False  # type: ignore[union-attr]


def test_deconstruct_keeps_the_source_and_omits_the_default_blank() -> None:
    _, path, _, kwargs = DbSlugField(source="title", max_length=80).deconstruct()
    assert path == "astral_taskclaim.fields.DbSlugField"
    assert kwargs == {"source": "title", "max_length": 80}
    _, _, _, kwargs = DbSlugField(blank=False).deconstruct()
    assert kwargs == {"source": "name", "blank": False}


def test_the_source_must_be_a_field_name() -> None:
    with pytest.raises(TypeError, match="source"):
        DbSlugField(source="")


def test_the_test_app_migrations_are_complete() -> None:
    out = StringIO()
    call_command("makemigrations", "testapp", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def _check(model: type[models.Model]) -> list[Any]:
    return [message.id for message in model._meta.get_field("slug").check()]


@isolate_apps("tests.testapp")
def test_checks_reject_a_missing_or_non_text_source() -> None:
    class Missing(models.Model):  # noqa: DJ008
        slug = DbSlugField(source="title")

        class Meta:
            app_label = "testapp"

    class Numeric(models.Model):  # noqa: DJ008
        name = models.IntegerField()
        slug = DbSlugField()

        class Meta:
            app_label = "testapp"

    assert _check(Missing) == ["astral_taskclaim.E020"]
    assert _check(Numeric) == ["astral_taskclaim.E020"]


@isolate_apps("tests.testapp")
def test_checks_warn_about_a_slug_shorter_than_its_source() -> None:
    class Short(models.Model):  # noqa: DJ008
        name = models.CharField(max_length=200)
        slug = DbSlugField(max_length=50)

        class Meta:
            app_label = "testapp"

    class Fine(models.Model):  # noqa: DJ008
        name = models.TextField()
        slug = DbSlugField(max_length=50)

        class Meta:
            app_label = "testapp"

    assert _check(Short) == ["astral_taskclaim.W021"]
    assert _check(Fine) == []
    assert Short._meta.get_field("slug").check()[0].level == checks.WARNING
