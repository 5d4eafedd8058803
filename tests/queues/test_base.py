"""BaseQueue: what every backend inherits. ``encode`` names the queue for
every body it cannot send; ``configuration_errors`` keeps the serious
``check()`` messages, asked for once per instance however many enqueues
need them; no claimed insert unless the backend gives one, whose writers
write what ``encode`` does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from django.core import checks

from astral_taskclaim.core.envelope import encode_json, message_body
from astral_taskclaim.queues.base import BaseQueue, encoding_writer, json_writer
from astral_taskclaim.queues.messages import MessageBatch, ReceivedMessage


class Probe(BaseQueue):
    """A backend that sends nothing and counts its ``check()`` calls."""

    def __init__(self, *messages: checks.CheckMessage) -> None:
        super().__init__("probe")
        self.messages = list(messages)
        self.checks = 0

    def check(self) -> list[checks.CheckMessage]:
        self.checks += 1
        return self.messages

    def send(self, body: Any, *, delay_seconds: float = 0) -> None:
        raise AssertionError("not sent in these tests")

    def receive(self, *, max_messages: int, wait_seconds: float = 0) -> MessageBatch:
        return MessageBatch(self.name, [])

    def settle(self, messages: Sequence[ReceivedMessage]) -> None:
        pass


def nested(depth: int) -> list[Any]:
    body: list[Any] = []
    for _ in range(depth):
        body = [body]
    return body


def test_encode_is_compact_utf8_json() -> None:
    assert Probe().encode({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()


def test_a_body_nested_too_deep_is_a_value_error_naming_the_queue() -> None:
    message = r"^queue 'probe': body nests too deeply to encode as JSON$"
    with pytest.raises(ValueError, match=message):
        Probe().encode(nested(100_000))


def test_a_lone_surrogate_is_a_value_error_naming_the_queue() -> None:
    with pytest.raises(
        ValueError, match=r"^queue 'probe': body is not valid Unicode text: surrogates not allowed"
    ):
        Probe().encode({"name": "caf\udce9"})


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({"x": float("nan")}, r"body\['x'\] is nan \(JSON has no NaN or infinity\)"),
        ({"x": object()}, r"body\['x'\]: Object of type object is not JSON serializable"),
    ],
)
def test_a_body_that_is_not_json_is_a_type_error_naming_the_queue(body: Any, match: str) -> None:
    message = rf"^queue 'probe': body is not JSON-serialisable: .*{match}"
    with pytest.raises(TypeError, match=message):
        Probe().encode(body)


def test_configuration_errors_keep_the_serious_messages_and_ask_once() -> None:
    error = checks.Error("bad", id="probe.E001")
    critical = checks.Critical("worse", id="probe.E002")
    queue = Probe(checks.Warning("meh", id="probe.W001"), error, critical)
    assert queue.configuration_errors() == (error, critical)
    assert queue.configuration_errors() == (error, critical)
    assert queue.checks == 1


def test_a_well_configured_queue_is_asked_once_too() -> None:
    queue = Probe()
    assert queue.configuration_errors() == ()
    assert queue.configuration_errors() == ()
    assert queue.checks == 1


def test_a_backend_has_no_claimed_insert_unless_it_gives_one() -> None:
    assert Probe().claimed_insert("default") is None


@pytest.mark.parametrize("writer", [json_writer, encoding_writer])
def test_the_writers_write_what_encode_does_and_refuse_what_it_refuses(writer: Any) -> None:
    queue = Probe()
    task = {"name": 'Zoë "q" \\ \n\x01', "n": [1, 2.5, None]}
    token = "0f8fad5b-d9cb-469f-a165-70867728950e"
    write = writer(queue, 1.5)
    expected = queue.encode(message_body("k:ü", token, 1.5, task)).decode("utf-8")
    assert write("k:ü", token, task, encode_json(task, name="task")) == expected
    queue.max_body_bytes = len(expected.encode("utf-8")) - 1
    with pytest.raises(ValueError, match=r"queue 'probe': body is \d+ bytes, over the"):
        write("k:ü", token, task, encode_json(task, name="task"))
