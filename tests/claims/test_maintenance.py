"""maintenance.delete_expired: expired claims, a batch per transaction."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from astral_taskclaim.claims.maintenance import delete_expired, scrub
from tests.claimkit import claims, insert_claim
from tests.queues.postgres.pgqueue import rescanning_plans

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


def test_deletes_only_expired_claims_each_batch_in_its_own_transaction() -> None:
    for n in range(7):
        insert_claim(f"old:{n}", seconds=-1)
    insert_claim("live", seconds=60)
    with CaptureQueriesContext(connection) as queries:
        assert delete_expired(batch_size=3) == 7
    statements = [q["sql"].split()[0] for q in queries.captured_queries]
    # 3 + 3 + 1: the short batch ends it.
    assert statements == ["BEGIN", "--", "COMMIT"] * 3
    assert set(claims()) == {"live"}


def test_an_exact_multiple_takes_one_empty_batch_more() -> None:
    for n in range(4):
        insert_claim(f"old:{n}", seconds=-1)
    with CaptureQueriesContext(connection) as queries:
        assert delete_expired(batch_size=2) == 4
    assert sum(q["sql"] == "BEGIN" for q in queries.captured_queries) == 3
    assert claims() == {}


def test_a_batch_stays_a_batch_whatever_the_plan(caplog: pytest.LogCaptureFixture) -> None:
    for n in range(7):
        insert_claim(f"old:{n}", seconds=-1)
    with caplog.at_level("DEBUG", logger="astral_taskclaim.claims.maintenance"), rescanning_plans():
        assert delete_expired(batch_size=3) == 7
    assert [r.deleted for r in caplog.records] == [3, 3, 1]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("size", "error"), [(0, ValueError), (True, TypeError), (2.5, TypeError)])
def test_a_bad_batch_size_deletes_nothing(size: object, error: type) -> None:
    insert_claim("old", seconds=-1)
    with pytest.raises(error, match="batch_size"):
        delete_expired(batch_size=size)  # type: ignore[arg-type]
    assert set(claims()) == {"old"}


def test_scrub_empties_the_table() -> None:
    insert_claim("a", seconds=60)
    scrub()
    assert claims() == {}


@pytest.mark.parametrize("call", [lambda: delete_expired(using="nope"), lambda: scrub(using="x")])
def test_an_unknown_database_alias_is_named(call: Any) -> None:
    insert_claim("old", seconds=-1)
    with pytest.raises(ValueError, match="using must name an entry of DATABASES"):
        call()
    assert set(claims()) == {"old"}
