"""manage.py taskclaim_delete_expired: batches that never wait on a claimer."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from tests.claimkit import claims, insert_claim, raw_connection

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


def delete_expired(*args: str) -> str:
    out = io.StringIO()
    call_command("taskclaim_delete_expired", *args, stdout=out)
    return out.getvalue().strip()


def test_deletes_expired_claims_in_batches() -> None:
    for n in range(5):
        insert_claim(f"old:{n}", seconds=-10)
    insert_claim("live", seconds=600)
    assert delete_expired("--batch-size", "2") == "Deleted 5 expired claims."
    assert set(claims()) == {"live"}
    assert delete_expired() == "Deleted 0 expired claims."


def test_skips_a_claim_being_written_instead_of_waiting() -> None:
    insert_claim("old:busy", seconds=-10)
    insert_claim("old:free", seconds=-10)
    with raw_connection() as claimer, claimer.transaction():
        claimer.execute("SELECT 1 FROM taskclaim.claim WHERE key = 'old:busy' FOR UPDATE")
        with connection.cursor() as cursor:
            # Waiting for the row would fail this rather than hang it.
            cursor.execute("SET lock_timeout = '5s'")
        assert delete_expired() == "Deleted 1 expired claim."
    assert set(claims()) == {"old:busy"}
    assert delete_expired() == "Deleted 1 expired claim."


@pytest.mark.parametrize(
    ("args", "match"),
    [(["--batch-size", "0"], "--batch-size"), (["--database", "nope"], "--database")],
)
def test_bad_arguments(args: list[str], match: str) -> None:
    insert_claim("old", seconds=-10)
    with pytest.raises(CommandError, match=match):
        delete_expired(*args)
    assert set(claims()) == {"old"}
