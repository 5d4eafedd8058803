"""Key search bounds, collation detection, estimated counts and relative
times, checked against Python's own string order and the real server."""

from __future__ import annotations

import logging

import pytest
from django.contrib.admin.sites import AdminSite
from django.db import connection
from django.test import RequestFactory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from astral_taskclaim.admin import ClaimAdmin
from astral_taskclaim.admin.queries import (
    Count,
    _EstimatedCountPaginator,
    _planner_rows,
    _prefix_upper_bound,
    _sorts_by_code_point,
    estimated_count,
    key_search,
    key_sorts_by_code_point,
    relative_time,
)
from astral_taskclaim.models import Claim
from tests.admin.data import add_claims
from tests.claimkit import insert_claim

# Text PostgreSQL can store: no NUL, no surrogates.
KEY_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=6,
)
EDGE_KEYS = ["", "a", "a%", "a_", "a\\", "ab", "a\U0010ffff", "a\U0010ffffb", "\U0010ffff", "b"]


def matches(prefix: str, key: str) -> bool:
    """Python's verdict on the range ``key_search`` builds."""
    upper = _prefix_upper_bound(prefix)
    return key >= prefix and (upper is None or key < upper)


@given(prefix=KEY_TEXT.filter(bool), key=KEY_TEXT)
def test_prefix_range_is_exactly_startswith(prefix, key):
    assert matches(prefix, key) == key.startswith(prefix)


@pytest.mark.parametrize(
    ("prefix", "bound"),
    [
        ("a", "b"),
        ("a\U0010ffff", "b"),
        ("\ud7ff", "\ue000"),  # the bound skips the surrogates
        ("\U0010ffff\U0010ffff", None),
        ("", None),
    ],
)
def test_prefix_upper_bound(prefix, bound):
    assert _prefix_upper_bound(prefix) == bound


@pytest.mark.parametrize(
    ("provider", "locale", "expected"),
    [
        ("c", "C", True),
        ("c", "POSIX", True),
        ("c", "C.UTF-8", True),
        ("c", "C.utf8", True),
        ("b", "C.UTF-8", True),
        ("b", None, True),
        ("c", "en_US.UTF-8", False),
        ("i", "und-x-icu", False),
        ("i", None, False),
    ],
)
def test_sorts_by_code_point(provider, locale, expected):
    assert _sorts_by_code_point(provider, locale) is expected


@pytest.mark.django_db
def test_test_database_keys_sort_by_code_point():
    with connection.cursor() as cursor:
        cursor.execute("SELECT datcollate FROM pg_database WHERE datname = current_database()")
        (collate,) = cursor.fetchone()
    if collate not in ("C", "POSIX", "C.UTF-8", "C.utf8"):
        pytest.skip(f"the test database's collation is {collate}")
    assert key_sorts_by_code_point("default") is True


@pytest.mark.django_db
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(KEY_TEXT, max_size=8, unique=True), prefix=KEY_TEXT.filter(bool))
def test_database_range_agrees_with_python(keys, prefix):
    rows = [key for key in {*keys, *EDGE_KEYS, prefix, prefix + "z"} if key]
    with connection.cursor() as cursor:
        cursor.execute("SAVEPOINT example")
        for key in rows:
            insert_claim(key, seconds=60)
        found = set(
            Claim.objects.filter(key_search(prefix, code_point_order=True)).values_list(
                "key", flat=True
            )
        )
        cursor.execute("ROLLBACK TO SAVEPOINT example")
    assert found == {key for key in rows if key.startswith(prefix)}


@pytest.mark.django_db
@pytest.mark.parametrize("term", ["a", "a%", "a_", "a\\", "x"])
def test_linguistic_fallback_is_literal_too(term):
    keys = ["a", "a%b", "a_b", "axb", "a\\b", "ab", "b"]
    for key in keys:
        insert_claim(key, seconds=60)

    found = set(
        Claim.objects.filter(key_search(term, code_point_order=False)).values_list("key", flat=True)
    )

    assert found == {key for key in keys if key.startswith(term)}


@pytest.mark.django_db
def test_admin_falls_back_and_logs_without_code_point_order(monkeypatch, caplog, admin_user):
    insert_claim("a%b", seconds=60)
    insert_claim("ab", seconds=60)
    monkeypatch.setattr(
        "astral_taskclaim.admin.claims.key_sorts_by_code_point", lambda using: False
    )
    request = RequestFactory().get("/")
    request.user = admin_user
    model_admin = ClaimAdmin(Claim, AdminSite())

    with caplog.at_level(logging.WARNING, logger="astral_taskclaim"):
        found, duplicates = model_admin.get_search_results(
            request, model_admin.get_queryset(request), "a%"
        )

    assert [claim.key for claim in found] == ["a%b"]
    assert duplicates is False
    assert [r.event for r in caplog.records] == ["taskclaim.admin_key_search_unindexed"]


@pytest.mark.django_db
def test_admin_search_with_nul_matches_nothing(admin_user):
    insert_claim("a", seconds=60)
    request = RequestFactory().get("/")
    request.user = admin_user
    model_admin = ClaimAdmin(Claim, AdminSite())

    found, _ = model_admin.get_search_results(request, model_admin.get_queryset(request), "a\x00")

    assert list(found) == []


def test_key_search_rejects_bad_terms():
    with pytest.raises(TypeError, match="term must be a str"):
        key_search(b"a", code_point_order=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="term must not be empty"):
        key_search("", code_point_order=True)


@pytest.mark.django_db
def test_prefix_and_state_queries_use_their_indexes():
    add_claims(20_000, prefix="project:")
    searched = Claim.objects.filter(key_search("project:77", code_point_order=True))
    expiring = Claim.objects.active().order_by("expires_at")[:100]

    assert "claim_pkey" in searched.explain()
    assert "Seq Scan" not in searched.explain()
    assert "claim_expires_at_idx" in expiring.explain()


@pytest.mark.django_db
def test_estimated_count_is_exact_up_to_the_bound_then_estimated():
    add_claims(300)

    assert estimated_count(Claim.objects.all(), exact_up_to=300) == Count(300, exact=True)
    assert estimated_count(Claim.objects.filter(key="bulk:7")) == Count(1, exact=True)
    estimate = estimated_count(Claim.objects.all(), exact_up_to=100)
    assert estimate.exact is False
    assert estimate.value >= 101
    assert 200 <= _planner_rows(Claim.objects.all()) <= 400  # ANALYZEd: close to 300


def test_estimated_count_rejects_bad_bounds():
    with pytest.raises(TypeError, match="exact_up_to must be an int"):
        estimated_count(Claim.objects.none(), exact_up_to=True)
    with pytest.raises(ValueError, match="exact_up_to must be at least 0"):
        estimated_count(Claim.objects.none(), exact_up_to=-1)


@pytest.mark.django_db
def test_paginator_reports_estimates():
    add_claims(50)

    class Small(_EstimatedCountPaginator):
        exact_up_to = 10

    estimated = Small(Claim.objects.all(), 20)
    exact = _EstimatedCountPaginator(Claim.objects.all(), 20)
    listed = _EstimatedCountPaginator(list(range(7)), 5)

    assert estimated.is_estimate is True
    assert estimated.count >= 11
    assert (exact.count, exact.is_estimate, exact.num_pages) == (50, False, 3)
    assert (listed.count, listed.is_estimate) == (7, False)


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (0.4, "now"),
        (-0.4, "now"),
        (5, "in 5 s"),
        (59.7, "in 1 min"),
        (-42, "42 s ago"),
        (245, "in 4 min"),
        (-89 * 60, "89 min ago"),
        (3 * 3600, "in 3 h"),
        (-3 * 3600 - 100, "3 h ago"),
        (35 * 3600, "in 35 h"),
        (3 * 86400, "in 3 d"),
        (-40 * 86400, "40 d ago"),
    ],
)
def test_relative_time(seconds, words):
    assert relative_time(seconds) == words
