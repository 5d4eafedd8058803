"""claim_task, hold_task and release_task against the real claim table."""

from __future__ import annotations

import math
import threading
import uuid

import pytest
from django.db import connections

from astral_taskclaim import claim_task, hold_task, release_task
from astral_taskclaim.core.envelope import encode_json
from astral_taskclaim.core.validation import MAX_KEY_BYTES, MAX_SECONDS
from tests.claimkit import claims, insert_claim

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

UUID_TEXT = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def test_claim_returns_a_fresh_token_and_stores_the_window() -> None:
    token = claim_task("project:42", window_seconds=3600)
    assert token is not None
    assert uuid.UUID(token).version == 4
    stored, left = claims()["project:42"]
    assert stored == token
    assert 3500 < left <= 3600


def test_a_second_claim_inside_the_window_gets_none_and_changes_nothing() -> None:
    token = claim_task("k", window_seconds=600)
    before = claims()["k"]
    assert claim_task("k", window_seconds=9999) is None
    after = claims()["k"]
    assert after[0] == token == before[0]
    assert after[1] <= before[1]  # the expiry was not pushed out


def test_an_expired_claim_is_replaced_by_a_new_token() -> None:
    old = insert_claim("k", seconds=-1)
    token = claim_task("k", window_seconds=60)
    assert token is not None
    assert token != old
    assert claims()["k"][0] == token


def test_fractional_windows_are_kept_to_the_microsecond() -> None:
    claim_task("k", window_seconds=0.25)
    assert 0 < claims()["k"][1] <= 0.25


def test_claims_of_different_keys_are_independent() -> None:
    assert claim_task("a", window_seconds=60) is not None
    assert claim_task("b", window_seconds=60) is not None
    assert set(claims()) == {"a", "b"}


def test_the_longest_key_is_accepted() -> None:
    key = "é" * (MAX_KEY_BYTES // 2)
    assert claim_task(key, window_seconds=60) is not None
    assert key in claims()


def test_hold_extends_the_holders_claim_by_delay_plus_window() -> None:
    token = claim_task("k", window_seconds=10)
    assert token is not None
    hold_task("k", token, delay_seconds=120, window_seconds=60)
    stored, left = claims()["k"]
    assert stored == token
    assert 170 < left <= 180


def test_hold_reclaims_a_freed_key_with_the_same_token() -> None:
    token = str(uuid.uuid4())
    hold_task("k", token, delay_seconds=30, window_seconds=30)
    stored, left = claims()["k"]
    assert stored == token
    assert 50 < left <= 60


def test_hold_of_an_expired_row_of_the_same_token_extends_it() -> None:
    token = insert_claim("k", seconds=-5)
    hold_task("k", token.upper(), delay_seconds=30, window_seconds=0)
    stored, left = claims()["k"]
    assert stored == token
    assert 20 < left <= 30


def test_hold_leaves_a_later_claim_alone() -> None:
    later = insert_claim("k", seconds=5)
    hold_task("k", str(uuid.uuid4()), delay_seconds=3600, window_seconds=3600)
    stored, left = claims()["k"]
    assert stored == later
    assert left <= 5


def test_release_frees_the_key_for_its_token_only() -> None:
    token = claim_task("k", window_seconds=600)
    assert token is not None
    release_task("k", str(uuid.uuid4()))
    assert claims()["k"][0] == token
    release_task("k", uuid.UUID(token))
    assert claims() == {}
    assert claim_task("k", window_seconds=600) is not None


def test_release_accepts_an_upper_case_token() -> None:
    token = claim_task("k", window_seconds=600)
    assert token is not None
    release_task("k", token.upper())
    assert claims() == {}


def claim_concurrently(key: str, threads: int) -> list[str | None]:
    """What ``threads`` threads, each on its own connection, get claiming
    ``key`` at the same moment."""
    barrier = threading.Barrier(threads)
    results: list[str | None] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def claim() -> None:
        try:
            connections["default"].ensure_connection()
            barrier.wait()  # all connected: the claims race
            token = claim_task(key, window_seconds=600)
            with lock:
                results.append(token)
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=claim) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    return results


@pytest.mark.parametrize("expired", [False, True])
def test_concurrent_claims_of_one_key_yield_exactly_one_token(expired: bool) -> None:
    if expired:
        insert_claim("hot", seconds=-1)
    results = claim_concurrently("hot", 8)
    assert len(results) == 8
    tokens = [token for token in results if token is not None]
    assert len(tokens) == 1
    assert claims()["hot"][0] == tokens[0]


BAD_KEYS = [
    (None, TypeError, "key must be a str"),
    (b"k", TypeError, "key must be a str"),
    ("", ValueError, "key must not be empty"),
    ("a\x00b", ValueError, "key must not contain NUL"),
    ("\ud800", ValueError, "key is not valid Unicode"),
    ("x" * (MAX_KEY_BYTES + 1), ValueError, "over the 1024-byte limit"),
    ("é" * (MAX_KEY_BYTES // 2 + 1), ValueError, "1026 bytes of UTF-8"),
]
BAD_SECONDS = [
    (None, TypeError),
    ("60", TypeError),
    (True, TypeError),
    (math.nan, ValueError),
    (math.inf, ValueError),
    (-math.inf, ValueError),
    (-1, ValueError),
    (-0.001, ValueError),
    (MAX_SECONDS + 1, ValueError),
    (10**400, ValueError),
]


@pytest.mark.parametrize(("key", "error", "message"), BAD_KEYS)
def test_bad_keys_raise_before_any_write(key: object, error: type[Exception], message: str) -> None:
    token = str(uuid.uuid4())
    calls = [
        lambda: claim_task(key, window_seconds=60),  # type: ignore[arg-type]
        lambda: hold_task(key, token, delay_seconds=1, window_seconds=1),  # type: ignore[arg-type]
        lambda: release_task(key, token),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(error, match=message):
            call()
    assert claims() == {}


@pytest.mark.parametrize(("seconds", "error"), BAD_SECONDS)
def test_bad_windows_and_delays_raise_naming_the_argument(
    seconds: object, error: type[Exception]
) -> None:
    token = str(uuid.uuid4())
    with pytest.raises(error, match="window_seconds"):
        claim_task("k", window_seconds=seconds)  # type: ignore[arg-type]
    with pytest.raises(error, match="window_seconds"):
        hold_task("k", token, delay_seconds=1, window_seconds=seconds)  # type: ignore[arg-type]
    with pytest.raises(error, match="delay_seconds"):
        hold_task("k", token, delay_seconds=seconds, window_seconds=1)  # type: ignore[arg-type]
    assert claims() == {}


@pytest.mark.parametrize(
    ("token", "error"),
    [
        (None, TypeError),
        (42, TypeError),
        ("", ValueError),
        ("not-a-uuid", ValueError),
        ("0123456789abcdef0123456789abcdef", ValueError),  # unhyphenated
        ("{01234567-89ab-cdef-0123-456789abcdef}", ValueError),
        ("01234567-89ab-cdef-0123-456789abcdef\n", ValueError),
        ("0123456g-89ab-cdef-0123-456789abcdef", ValueError),
    ],
)
def test_bad_tokens_raise_naming_the_argument(token: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="token"):
        hold_task("k", token, delay_seconds=1, window_seconds=1)  # type: ignore[arg-type]
    with pytest.raises(error, match="token"):
        release_task("k", token)  # type: ignore[arg-type]
    assert claims() == {}


def test_an_unknown_database_alias_is_rejected() -> None:
    with pytest.raises(ValueError, match="using must name an entry of DATABASES"):
        claim_task("k", window_seconds=1, using="nope")
    assert claims() == {}


@pytest.mark.parametrize(
    ("task", "error"),
    [
        (object(), TypeError),
        ({1, 2}, TypeError),
        (math.nan, ValueError),
        ({"a": math.inf}, ValueError),
    ],
)
def test_tasks_must_be_strict_json(task: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="task is not JSON-serialisable"):
        encode_json(task, name="task")
