"""The unmanaged Claim model over taskclaim.claim."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from astral_taskclaim.models import Claim

pytestmark = pytest.mark.django_db


@pytest.fixture
def claims() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO taskclaim.claim (key, expires_at, token) VALUES
               ('live', now() + interval '5 minutes', gen_random_uuid()),
               ('old', now() - interval '5 minutes', gen_random_uuid())"""
        )


def test_active_and_expired_split_by_the_database_clock(claims: None) -> None:
    assert list(Claim.objects.active().values_list("key", flat=True)) == ["live"]
    assert list(Claim.objects.expired().values_list("key", flat=True)) == ["old"]


def test_is_active(claims: None) -> None:
    states = {claim.key: claim.is_active for claim in Claim.objects.all()}
    assert states == {"live": True, "old": False}


def test_fields_read_back_typed(claims: None) -> None:
    claim = Claim.objects.get(pk="live")
    assert isinstance(claim.token, uuid.UUID)
    assert claim.expires_at - timezone.now() > timedelta(minutes=4)
    assert str(claim) == "live"


def test_default_order_is_by_expiry(claims: None) -> None:
    assert [claim.key for claim in Claim.objects.all()] == ["old", "live"]


def test_model_is_unmanaged_on_the_sql_table() -> None:
    assert Claim._meta.managed is False
    assert Claim._meta.db_table == '"taskclaim"."claim"'


def test_rows_python_cannot_load_read_back_clamped_and_filter_true() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO taskclaim.claim (key, expires_at, token) VALUES
               ('forever', 'infinity', gen_random_uuid()),
               ('never', '-infinity', gen_random_uuid()),
               ('far', '20000-01-01 00:00:00+00', gen_random_uuid())"""
        )
    loaded = {claim.key: claim.expires_at for claim in Claim.objects.all()}
    assert loaded["forever"].year == 9999
    assert loaded["far"] == loaded["forever"]
    assert loaded["never"].year == 1
    # Filters and ordering read the column itself, not the clamped value.
    assert set(Claim.objects.active().values_list("key", flat=True)) == {"forever", "far"}
    assert list(Claim.objects.order_by("-expires_at").values_list("key", flat=True)) == [
        "forever",
        "far",
        "never",
    ]
    assert Claim.objects.get(pk="forever").is_active
    assert not Claim.objects.get(pk="never").is_active
