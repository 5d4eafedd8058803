"""The one validation of every backend's ``OPTIONS``: parsing, check
messages, the run-time error, secrets and the batch limit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import pytest
from django.core.exceptions import ImproperlyConfigured

from astral_taskclaim.queues.base import BaseQueue
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.queues.messages import MessageBatch, ReceivedMessage
from astral_taskclaim.queues.options import (
    Option,
    Problem,
    Secret,
    integer,
    number,
    optional,
    parse_options,
    secret,
    text,
)

SPEC = {
    "name": Option(text),
    "token": Option(secret, secret=True),
    "size": Option(integer(1, 10), default=5),
    "rate": Option(number(0, 1, low_open=True), default=0.5),
    "region": Option(optional(text), default=None),
    "label": Option(text, default_factory=lambda alias: f"{alias}-label"),
}
OWNER = "TASKCLAIM_QUEUES['q']['OPTIONS']"


class SpecQueue(MemoryQueue):
    """A memory queue declaring :data:`SPEC` instead of its own options."""

    option_spec: ClassVar[dict[str, Option]] = {**MemoryQueue.option_spec, **SPEC}


def test_a_secret_shows_only_when_revealed() -> None:
    token = Secret("s3cr3t")
    assert "s3cr3t" not in repr(token) + str(token) + repr([token]) + f"{token}"
    assert token.reveal() == "s3cr3t"
    assert token.redact("Bearer s3cr3t failed") == "Bearer [redacted] failed"


def test_parse_options_fills_defaults() -> None:
    values, problems = parse_options("q", {"name": "n", "token": "t", "region": None}, SPEC)
    assert problems == []
    assert values["size"] == 5
    assert values["rate"] == 0.5
    assert values["region"] is None
    assert values["label"] == "q-label"
    assert values["token"].reveal() == "t"


def test_parse_options_reports_every_problem_without_echoing_secrets() -> None:
    options = {"token": 12345678, "size": True, "rate": 0, "colour": "red", "outbox": True}
    values, problems = parse_options("q", options, SPEC)
    messages = [(m.id, m.msg) for m in (problem.message(OWNER) for problem in problems)]
    assert messages == [
        ("astral_taskclaim.E012", f"{OWNER}['name'] is required"),
        ("astral_taskclaim.E013", f"{OWNER}['token'] must be a non-empty string, got a int"),
        ("astral_taskclaim.E013", f"{OWNER}['size'] must be an integer in [1, 10], got True"),
        ("astral_taskclaim.E013", f"{OWNER}['rate'] must be a number in (0, 1], got 0"),
        (
            "astral_taskclaim.E014",
            f"{OWNER} has unknown option 'colour'; known: label, name, rate, region, size, token",
        ),
        (
            "astral_taskclaim.E015",
            f"{OWNER}['outbox'] is an option of the remote queues (Cloudflare, SQS) only",
        ),
    ]
    assert "12345678" not in repr(problems)
    # A bad value falls back to its default, a missing required one to None.
    assert (values["name"], values["size"], values["rate"]) == (None, 5, 0.5)


def test_a_w_id_is_a_warning_and_an_e_id_an_error() -> None:
    warning = Problem("W018", "is odd", "database", "'x'", hint="why").message(OWNER)
    assert (warning.is_serious(), warning.hint) == (False, "why")
    assert warning.msg == f"{OWNER}['database'] is odd, got 'x'"
    assert Problem("E013", "disagree").message(OWNER).is_serious()


def test_check_reports_and_use_raises_naming_the_queue_and_every_option() -> None:
    queue = SpecQueue("q", options={"size": 11, "token": "tok en", "rate": 2})
    assert [m.id for m in queue.check()] == ["astral_taskclaim.E012"] + [
        "astral_taskclaim.E013"
    ] * 3
    with pytest.raises(ImproperlyConfigured) as caught:
        queue.send({"n": 1})
    error = str(caught.value)
    assert error.startswith("queue 'q' is misconfigured: ")
    for name in ("name", "token", "size", "rate"):
        assert f"{OWNER}[{name!r}]" in error
    assert "tok en" not in error + repr(queue.check()) + repr(queue.options)
    assert isinstance(queue.options["token"], Secret)


def test_a_backend_without_a_spec_keeps_its_options_unchecked() -> None:
    class Free(BaseQueue):
        def send(self, body: Any, *, delay_seconds: float = 0) -> None:
            raise NotImplementedError

        def receive(self, *, max_messages: int, wait_seconds: float = 0) -> MessageBatch:
            raise NotImplementedError

        def settle(self, messages: Sequence[ReceivedMessage]) -> None:
            raise NotImplementedError

    queue = Free("free", options={"anything": 1})
    assert queue.ensure_configured() == {}
    assert queue.check() == []
    assert queue.config == {}


@pytest.mark.parametrize("bodies", ["body", b"body", 5, iter([1])])
def test_send_many_needs_a_sequence(bodies: Any) -> None:
    with pytest.raises(TypeError, match="queue 'q': send_many needs a sequence of bodies"):
        MemoryQueue("q").send_many(bodies)


def test_send_many_refuses_more_than_the_batch_limit() -> None:
    queue = MemoryQueue("q")
    queue.max_batch_size = 2  # type: ignore[misc]
    with pytest.raises(ValueError, match="queue 'q': 3 bodies, over the batch limit of 2"):
        queue.send_many([1, 2, 3])
    assert queue.count() == 0
