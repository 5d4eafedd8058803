"""Bad settings: a wrong ``TASKCLAIM_*`` value fails its first use (and
the system checks) with an error naming the setting, before anything is
written."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from astral_taskclaim.checks import check_queues, check_settings
from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.consumer.consume import consume_claimed
from astral_taskclaim.queues import create_queue
from tests.reliability.badinput import QUEUE, batch, rejected

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("populated")]


@pytest.mark.parametrize(
    ("setting", "value", "match"),
    [
        ("TASKCLAIM_DATABASE", "nope", "TASKCLAIM_DATABASE must name an entry of DATABASES"),
        ("TASKCLAIM_DATABASE", 1, "TASKCLAIM_DATABASE"),
        ("TASKCLAIM_QUEUES", ["bad"], "TASKCLAIM_QUEUES must be a dict"),
        ("TASKCLAIM_QUEUES", {"bad": "postgres"}, "TASKCLAIM_QUEUES\\['bad'\\] needs a BACKEND"),
        ("TASKCLAIM_QUEUES", {"bad": {"BACKEND": "no.such.Queue"}}, "cannot import BACKEND"),
        ("TASKCLAIM_QUEUES", {"bad": {"BACKEND": "builtins.dict"}}, "is not a BaseQueue"),
        (
            "TASKCLAIM_QUEUES",
            {"bad": {**QUEUE["bad"], "OPTIONS": []}},
            "OPTIONS'\\] must be a dict",
        ),
        (
            "TASKCLAIM_QUEUES",
            {"bad": {**QUEUE["bad"], "OPTIONS": {"queue_name": "x\x00"}}},
            "queue_name'\\] must be a non-empty str without NUL",
        ),
        (
            "TASKCLAIM_QUEUES",
            {"bad": {**QUEUE["bad"], "OPTIONS": {"queue_name": "q" * 54}}},
            "over the 53-byte limit",
        ),
        (
            "TASKCLAIM_QUEUES",
            {"bad": {**QUEUE["bad"], "OPTIONS": {"visibility_timeout": math.nan}}},
            "visibility_timeout'\\] must be a number of seconds",
        ),
        (
            "TASKCLAIM_QUEUES",
            {"bad": {**QUEUE["bad"], "OPTIONS": {"listen": "yes"}}},
            "listen'\\] must be True or False",
        ),
        (
            "TASKCLAIM_QUEUES",
            {"bad": {**QUEUE["bad"], "OPTIONS": {"visiblity_timeout": 5}}},
            "unknown option 'visiblity_timeout'",
        ),
    ],
)
@pytest.mark.parametrize("via", ["function", "checks"])
def test_a_bad_setting_fails_the_first_use_naming_it(
    setting: str, value: Any, match: str, via: str
) -> None:
    with override_settings(**{setting: value}):
        if via == "function":
            rejected(
                lambda: enqueue_claimed(create_queue("bad"), "old", {}, window_seconds=60),
                ImproperlyConfigured,
                match,
            )
        else:  # what every management command reports before it runs
            errors = [m.msg for m in check_settings() + check_queues() if m.is_serious()]
            assert any(re.search(match, error) for error in errors), errors


@pytest.mark.parametrize("value", [0, 2, "0.5", math.nan, True])
def test_a_bad_delay_scale_stops_consume_claimed_before_any_message(value: Any) -> None:
    delivered = batch()
    with override_settings(TASKCLAIM_DELAY_SCALE=value):
        rejected(
            lambda: consume_claimed(
                delivered, parse=lambda t: t, run=lambda t: 1 / 0, max_retries=0
            ),
            ImproperlyConfigured,
            "TASKCLAIM_DELAY_SCALE",
        )
    assert delivered.messages[0].settlement is None


@pytest.mark.parametrize("setting", ["TASKCLAIM_ADMIN_ROLE", "TASKCLAIM_SERVICE_ROLE"])
@pytest.mark.parametrize("value", ["x; DROP TABLE y", "a" * 64, 42, "caf\udce9", "r\x00"])
def test_a_bad_role_name_is_named(setting: str, value: Any) -> None:
    with override_settings(**{setting: value}):
        [error] = check_settings()
    assert error.id == "astral_taskclaim.E006"
    assert setting in error.msg
