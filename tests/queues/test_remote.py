"""What the remote backends share: options, secrets, batching."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from astral_taskclaim.queues.remote import (
    Option,
    OptionProblem,
    Secret,
    batch_bodies,
    chunks,
    integer,
    number,
    optional,
    parse_options,
    raise_problems,
    secret,
    text,
)

SPEC = {
    "name": Option(text),
    "token": Option(secret, secret=True),
    "size": Option(integer(1, 10), default=5),
    "rate": Option(number(0, 1, low_open=True), default=0.5),
    "region": Option(optional(text), default=None),
}
OWNER = "TASKCLAIM_QUEUES['q']['OPTIONS']"


def test_a_secret_shows_only_when_revealed() -> None:
    token = Secret("s3cr3t")
    assert "s3cr3t" not in repr(token) + str(token) + repr([token]) + f"{token}"
    assert token.reveal() == "s3cr3t"
    assert token.redact("Bearer s3cr3t failed") == "Bearer [redacted] failed"


def test_parse_options_fills_defaults() -> None:
    values, problems = parse_options(OWNER, {"name": "n", "token": "t", "region": None}, SPEC)
    assert problems == []
    assert values["size"] == 5
    assert values["rate"] == 0.5
    assert values["region"] is None
    assert values["token"].reveal() == "t"


def test_parse_options_reports_every_problem_without_echoing_secrets() -> None:
    options = {"token": 12345678, "size": True, "rate": 0, "colour": "red"}
    values, problems = parse_options(OWNER, options, SPEC)
    assert problems == [
        OptionProblem("missing", f"{OWNER}['name'] is required"),
        OptionProblem("invalid", f"{OWNER}['token'] must be a non-empty string, got a int"),
        OptionProblem("invalid", f"{OWNER}['size'] must be an integer in [1, 10], got True"),
        OptionProblem("invalid", f"{OWNER}['rate'] must be a number in (0, 1], got 0"),
        OptionProblem(
            "unknown",
            f"{OWNER} has unknown option 'colour'; known: name, rate, region, size, token",
        ),
    ]
    assert "12345678" not in repr(problems)
    assert values["name"] is None
    with pytest.raises(ImproperlyConfigured, match=r"\['name'\] is required; .*'colour'"):
        raise_problems(problems)
    raise_problems([])


def test_batch_bodies() -> None:
    batch_bodies("queue 'q'", [1, 2], 2)
    with pytest.raises(ValueError, match="queue 'q': 3 bodies, over the batch limit of 2"):
        batch_bodies("queue 'q'", [1, 2, 3], 2)
    with pytest.raises(TypeError, match="sequence of bodies"):
        batch_bodies("queue 'q'", "body", 2)


def test_chunks_respect_count_and_size() -> None:
    items = [b"a" * 40, b"b" * 40, b"c" * 40, b"d" * 200, b"e"]
    assert list(chunks(items, 100, 100)) == [items[:2], items[2:3], items[3:4], items[4:]]
    assert list(chunks(items, 2, 10_000)) == [items[:2], items[2:4], items[4:]]
    assert list(chunks([], 2, 10)) == []
