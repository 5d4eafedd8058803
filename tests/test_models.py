"""The unmanaged Claim and ClaimedRun models over taskclaim.claim and taskclaim.run."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from astral_taskclaim.models import Claim, ClaimedRun

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


#: Django's column type of each field class, as PostgreSQL names it.
PG_TYPES = {
    "UUIDField": "uuid",
    "TextField": "text",
    "IntegerField": "integer",
    "JSONField": "jsonb",
    "LoadableDateTimeField": "timestamp with time zone",
}


def test_the_claimed_run_model_matches_its_table() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT column_name, data_type, is_nullable = 'YES'
               FROM information_schema.columns
               WHERE table_schema = 'taskclaim' AND table_name = 'run'"""
        )
        table = {name: (kind, nullable) for name, kind, nullable in cursor.fetchall()}
    model = {
        field.column: (PG_TYPES[type(field).__name__], field.null)
        for field in ClaimedRun._meta.concrete_fields
    }
    assert model == table
    assert ClaimedRun._meta.managed is False
    assert ClaimedRun._meta.db_table == '"taskclaim"."run"'


def test_a_claimed_run_reads_back_typed_and_odd_values_load() -> None:
    run_id = uuid.uuid4()
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO taskclaim.run (id, task, queue, key, status, attempts, errors,
                 worker_ids, started_at, last_attempted_at, finished_at)
               VALUES (%s, 'app.job', 'default', 'k', 'FAILED', 2, '[1, {"attempt": 2}]',
                 '{}', '-infinity', now(), 'infinity')""",
            [run_id],
        )
    run = ClaimedRun.objects.get(pk=run_id)
    assert (str(run), run.attempts, run.error_entries) == (f"app.job {run_id}", 2, [{"attempt": 2}])
    assert (run.started_at.year, run.finished_at.year) == (1, 9999)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.run")
