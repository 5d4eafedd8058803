"""The Slug function, the __slug lookup and a functional slug index."""

from __future__ import annotations

import pytest
from django.db import connection, models

from astral_taskclaim.functions import Slug
from astral_taskclaim.models import Claim
from tests.claimkit import insert_claim
from tests.testapp.models import Room

pytestmark = pytest.mark.django_db


def test_the_slug_lookup_matches_names_by_their_slug() -> None:
    Room.objects.bulk_create(
        [Room(name="Room 52"), Room(name="ROOM 52!"), Room(name="Room 5 2"), Room(name="Hall")]
    )
    found = Room.objects.filter(name__slug="room-52").order_by("name")
    assert [room.name for room in found] == ["ROOM 52!", "Room 52"]


def test_the_lookup_works_on_text_fields() -> None:
    insert_claim("Project:42", seconds=60)
    insert_claim("project 42", seconds=60)
    assert [c.key for c in Claim.objects.filter(key__slug="project42")] == ["Project:42"]
    assert Claim.objects.filter(key__slug__startswith="project").count() == 2


def test_slug_annotates_and_orders() -> None:
    Room.objects.bulk_create([Room(name="B Room", slug="x"), Room(name="A Room", slug="y")])
    rows = Room.objects.annotate(name_slug=Slug("name")).order_by("name_slug")
    assert [(room.name, room.name_slug) for room in rows] == [  # type: ignore[attr-defined]
        ("A Room", "a-room"),
        ("B Room", "b-room"),
    ]


def test_slug_of_an_expression_and_in_an_update() -> None:
    Room.objects.create(name="Old Name", slug="stale")
    Room.objects.update(slug=Slug(models.F("name")))
    assert Room.objects.get().slug == "old-name"
    value = Room.objects.annotate(s=Slug(models.Value("Hello World"))).values_list("s", flat=True)
    assert list(value) == ["hello-world"]


def test_the_index_is_on_slug_of_name() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'testapp_room_name_slug'")
        row = cursor.fetchone()
    assert row is not None
    assert "slug.slug((name)::text)" in row[0]


def test_a_slug_lookup_uses_the_functional_index() -> None:
    Room.objects.bulk_create([Room(name=f"Room {n}") for n in range(5000)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE testapp_room")
    plan = Room.objects.filter(name__slug="room-52").explain()
    assert "testapp_room_name_slug" in plan, plan
    assert "Seq Scan" not in plan, plan
    assert [room.name for room in Room.objects.filter(name__slug="room-52")] == ["Room 52"]
