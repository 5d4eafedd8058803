"""The Cloudflare Queues backend against the local server: retries and
backoff, Cloudflare's error codes, batching, the wire format and the token."""

from __future__ import annotations

import email.utils
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from astral_taskclaim.checks import check_queues
from astral_taskclaim.queues import queues
from astral_taskclaim.queues.cloudflare import CloudflareError, CloudflareQueue
from astral_taskclaim.queues.cloudflare_api import retry_after as _retry_after
from astral_taskclaim.queues.messages import ReceivedMessage

from .cloudflare_server import CloudflareQueuesServer

TS_ENVELOPE = (
    '{"key":"project:42","claim":"6f1c2a4e-8d3b-4f7a-9c21-5e0b7d9a3f10",'
    '"windowSeconds":300,"task":{"id":42}}'
)
Options = Callable[..., dict[str, Any]]


def make(options: dict[str, Any]) -> tuple[CloudflareQueue, list[float]]:
    """A queue whose backoff waits are recorded instead of slept."""
    queue = CloudflareQueue("cf", options=options)
    waits: list[float] = []
    queue._sleep = waits.append
    return queue, waits


def calls(server: CloudflareQueuesServer, queue_id: str, action: str = "") -> int:
    path = f"/queues/{queue_id}/messages{action}"
    return sum(request.path.endswith(path) for request in server.requests)


def test_429_is_retried_after_the_wait_retry_after_asks(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options, caplog: Any
) -> None:
    options = cloudflare_options()
    queue, waits = make(options)
    cloudflare_server.fail_next(2, status=429, retry_after="7")
    with caplog.at_level(logging.WARNING, logger="astral_taskclaim"):
        queue.send({"n": 1})
    assert waits == [7.0, 7.0]
    assert len(cloudflare_server.stored(options["queue_id"])) == 1
    retries = [r for r in caplog.records if getattr(r, "event", "") == "queue.request_retry"]
    assert [(r.status, r.attempt, r.wait_seconds) for r in retries] == [
        (429, 1, 7.0),
        (429, 2, 7.0),
    ]
    assert "10250 Queue is overloaded" in retries[0].getMessage()


def test_5xx_is_retried_with_exponential_backoff(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options
) -> None:
    options = cloudflare_options(backoff_seconds=1, request_retries=4)
    queue, waits = make(options)
    cloudflare_server.fail_next(3, status=503)
    batch = queue.receive(max_messages=1)
    assert batch.messages == []
    assert len(waits) == 3
    for attempt, wait in enumerate(waits):  # jittered within [half, full] of 1, 2, 4 s
        assert 2**attempt / 2 <= wait <= 2**attempt


def test_a_real_retry_waits_at_least_retry_after(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options
) -> None:
    options = cloudflare_options()
    queue = CloudflareQueue("cf", options=options)
    cloudflare_server.fail_next(1, status=429, retry_after="1")
    queue.send({"n": 1})
    first, second = [r for r in cloudflare_server.requests if options["queue_id"] in r.path]
    assert (first.status, second.status) == (429, 200)
    assert second.at - first.at >= 0.95


def test_gives_up_after_request_retries(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options
) -> None:
    options = cloudflare_options(request_retries=2)
    queue, waits = make(options)
    cloudflare_server.fail_next(3, status=500)
    with pytest.raises(
        CloudflareError, match="gave up after 3 attempts: HTTP 500: 15000"
    ) as caught:
        queue.send({"n": 1})
    assert caught.value.status == 500
    assert len(waits) == 2
    assert cloudflare_server.stored(options["queue_id"]) == []


def test_a_retry_after_longer_than_the_longest_backoff_fails_at_once(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options
) -> None:
    options = cloudflare_options(max_backoff_seconds=60)
    queue, waits = make(options)
    cloudflare_server.fail_next(1, status=429, retry_after="3600")
    with pytest.raises(CloudflareError, match="asked to wait 3600 s"):
        queue.send({"n": 1})
    assert waits == []
    assert calls(cloudflare_server, options["queue_id"]) == 1


def test_retry_after_as_an_http_date() -> None:
    in_a_minute = email.utils.formatdate(time.time() + 60, usegmt=True)
    assert 55 <= (_retry_after(in_a_minute) or 0) <= 60
    assert _retry_after("2.5") == 2.5
    assert _retry_after("-3") == 0
    assert _retry_after("nan") is None
    assert _retry_after("soon") is None
    assert _retry_after(None) is None


def test_client_errors_surface_cloudflare_codes_without_retrying(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options
) -> None:
    cases = [
        (cloudflare_options(api_token="not-the-token"), 403, (10000, "Authentication error")),
        (cloudflare_options(account_id="f" * 32), 403, (10000, "Authentication error")),
        (cloudflare_options(queue_id="e" * 32), 404, (10104, "Queue does not exist")),
    ]
    for options, status, error in cases:
        queue, waits = make(options)
        before = len(cloudflare_server.requests)
        with pytest.raises(CloudflareError) as caught:
            queue.receive(max_messages=1)
        assert (caught.value.status, caught.value.errors) == (status, [error])
        assert f"HTTP {status}: {error[0]} {error[1]}" in str(caught.value)
        assert waits == []
        assert len(cloudflare_server.requests) == before + 1


def test_missing_options_raise_before_any_request(
    cloudflare_server: CloudflareQueuesServer,
) -> None:
    queue = CloudflareQueue("cf", options={"base_url": cloudflare_server.base_url})
    before = len(cloudflare_server.requests)
    with pytest.raises(ImproperlyConfigured, match=r"\['account_id'\] is required"):
        queue.send({"n": 1})
    assert len(cloudflare_server.requests) == before


def test_system_checks_name_every_bad_option() -> None:
    queues_setting = {
        "cf": {
            "BACKEND": "astral_taskclaim.queues.cloudflare.CloudflareQueue",
            "OPTIONS": {"api_token": "", "timeout": 0, "visibility_ms": 5},
        }
    }
    with override_settings(TASKCLAIM_QUEUES=queues_setting):
        found = sorted((message.id, message.msg) for message in check_queues())
    owner = "TASKCLAIM_QUEUES['cf']['OPTIONS']"
    assert found == [
        ("astral_taskclaim.E012", f"{owner}['account_id'] is required"),
        ("astral_taskclaim.E012", f"{owner}['queue_id'] is required"),
        ("astral_taskclaim.E013", f"{owner}['api_token'] must be a non-empty string, got a str"),
        ("astral_taskclaim.E013", f"{owner}['timeout'] must be a number in (0, 600], got 0"),
        (
            "astral_taskclaim.E014",
            f"{owner} has unknown option 'visibility_ms'; known: account_id, api_token, "
            "backoff_seconds, base_url, max_backoff_seconds, outbox, poll_interval, queue_id, "
            "request_retries, timeout, visibility_timeout",
        ),
    ]


def test_configured_through_taskclaim_queues(cloudflare_options: Options) -> None:
    options = cloudflare_options()
    backend = "astral_taskclaim.queues.cloudflare.CloudflareQueue"
    with override_settings(TASKCLAIM_QUEUES={"jobs": {"BACKEND": backend, "OPTIONS": options}}):
        queue = queues["jobs"]
        assert isinstance(queue, CloudflareQueue)
        assert check_queues() == []
        queue.send({"n": 1})
        [message] = queue.receive(max_messages=1).messages
        assert message.body == {"n": 1}


def test_a_typescript_producers_envelope_is_consumed_byte_for_byte(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options
) -> None:
    options = cloudflare_options()
    url = f"{options['base_url']}/accounts/{options['account_id']}/queues/{options['queue_id']}"
    # What a Worker's env.QUEUE.send(envelope) amounts to: a json message.
    request = f'{{"content_type":"json","body":{TS_ENVELOPE}}}'
    headers = {"Authorization": f"Bearer {cloudflare_server.token}"}
    httpx.post(f"{url}/messages", content=request, headers=headers).raise_for_status()
    queue = CloudflareQueue("cf", options=options)
    [message] = queue.receive(max_messages=1).messages
    assert json.dumps(message.body, separators=(",", ":")) == TS_ENVELOPE
    message.ack()
    queue.settle([message])
    queue.send(json.loads(TS_ENVELOPE))
    [stored] = cloudflare_server.stored(options["queue_id"])
    assert (stored.content_type, stored.body) == ("json", TS_ENVELOPE)


def test_text_and_undecodable_bodies_are_delivered_as_text(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options, caplog: Any
) -> None:
    options = cloudflare_options()
    queue = CloudflareQueue("cf", options=options)
    url = f"{options['base_url']}/accounts/{options['account_id']}/queues/{options['queue_id']}"
    headers = {"Authorization": f"Bearer {cloudflare_server.token}"}
    httpx.post(
        f"{url}/messages", json={"content_type": "text", "body": "plain"}, headers=headers
    ).raise_for_status()
    [message] = queue.receive(max_messages=1).messages
    assert message.body == "plain"
    # A json message whose body is not base64 (as no Cloudflare sends) is kept as text.
    garbled = {"id": "x", "body": "%%%", "attempts": 1, "lease_id": "l", "metadata": {}}
    with caplog.at_level(logging.WARNING, logger="astral_taskclaim"):
        assert queue._decode(garbled).body == "%%%"
    assert [r.event for r in caplog.records if r.levelno >= logging.WARNING] == [
        "queue.body_undecodable"
    ]


def test_settle_is_one_ack_call_for_the_whole_batch(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options
) -> None:
    options = cloudflare_options()
    queue = CloudflareQueue("cf", options=options)
    queue.send_many([{"n": n} for n in range(5)])
    messages = queue.receive(max_messages=5).messages
    for message in messages[:3]:
        message.ack()
    for message in messages[3:]:
        message.retry(delay_seconds=0.2)  # rounded up to 1 s
    retried_at = time.monotonic()
    queue.settle([])
    assert calls(cloudflare_server, options["queue_id"], "/ack") == 0
    queue.settle(messages)
    assert calls(cloudflare_server, options["queue_id"], "/ack") == 1
    left = cloudflare_server.stored(options["queue_id"])
    assert sorted(json.loads(m.body)["n"] for m in left) == [3, 4]
    assert all(m.lease_expires is None and m.visible_at >= retried_at + 1 for m in left)


def test_send_many_is_one_batch_call_split_only_by_the_256_kb_limit(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options
) -> None:
    options = cloudflare_options()
    queue = CloudflareQueue("cf", options=options)
    queue.send_many([{"n": n} for n in range(100)])
    assert calls(cloudflare_server, options["queue_id"], "/batch") == 1
    big = "x" * (100 * 1024)
    queue.send_many([{"s": big}, {"s": big}, {"s": big}])  # 300 KB: two calls
    assert calls(cloudflare_server, options["queue_id"], "/batch") == 3
    assert len(cloudflare_server.stored(options["queue_id"])) == 103


def test_delays_are_rounded_up_to_whole_seconds(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options
) -> None:
    options = cloudflare_options()
    queue = CloudflareQueue("cf", options=options)
    sent_at = time.monotonic()
    queue.send({"n": 1}, delay_seconds=0.1)
    [stored] = cloudflare_server.stored(options["queue_id"])
    assert stored.visible_at >= sent_at + 1


def test_exhausted_retries_go_to_the_dead_letter_queue(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options
) -> None:
    dead = cloudflare_options(queue_settings={"name": "dead-letters"})
    main = cloudflare_options(
        queue_settings={"max_retries": 1, "dead_letter_queue": "dead-letters"}
    )
    queue, dead_letters = CloudflareQueue("cf", options=main), CloudflareQueue("dlq", options=dead)
    queue.send({"n": 1})
    for attempts in (1, 2):
        [message] = queue.receive(max_messages=1).messages
        assert message.attempts == attempts
        message.retry()
        queue.settle([message])
    assert queue.receive(max_messages=1).messages == []
    [letter] = dead_letters.receive(max_messages=1).messages
    assert (letter.body, letter.attempts) == ({"n": 1}, 1)


def test_receive_polls_until_wait_seconds_pass(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options
) -> None:
    options = cloudflare_options(poll_interval=0.25)
    queue = CloudflareQueue("cf", options=options)
    started = time.monotonic()
    assert queue.receive(max_messages=1, wait_seconds=1).messages == []
    assert time.monotonic() - started >= 1
    assert calls(cloudflare_server, options["queue_id"], "/pull") >= 3


def test_the_token_never_shows_in_logs_reprs_or_errors(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options, caplog: Any
) -> None:
    token = cloudflare_server.token
    options = cloudflare_options(backoff_seconds=0)
    queue = CloudflareQueue("cf", options=options)
    errors: list[str] = []
    with caplog.at_level(logging.DEBUG):
        queue.send({"n": 1})
        cloudflare_server.fail_next(1, status=502)
        queue.send_many([{"n": 2}, {"n": 3}])
        batch = queue.receive(max_messages=10)
        for message in batch.messages:
            message.ack()
        queue.settle(batch.messages)
        for broken in (
            CloudflareQueue("cf", options={**options, "queue_id": "0" * 32}),
            CloudflareQueue("cf", options={**options, "request_retries": 0}),
        ):
            cloudflare_server.fail_next(1, status=500)
            with pytest.raises(CloudflareError) as caught:
                broken.send({"n": 4})
            errors += [str(caught.value), repr(caught.value)]
    assert {"httpx", "astral_taskclaim.queues.cloudflare"} <= {r.name for r in caplog.records}
    shown = [caplog.text, repr(queue), str(queue.options), repr(batch), *errors]
    shown += [repr(record.__dict__) for record in caplog.records]
    assert not [text for text in shown if token in text]


def test_settling_a_message_from_another_backend_is_refused(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options
) -> None:
    options = cloudflare_options()
    queue = CloudflareQueue("cf", options=options)
    foreign = ReceivedMessage({"n": 1}, 1, receipt=(7, "lease"), id="7")
    foreign.ack()
    with pytest.raises(ValueError, match="'7' was not received from a CloudflareQueue"):
        queue.settle([foreign])
    assert calls(cloudflare_server, options["queue_id"], "/ack") == 0


def test_an_ack_reply_counting_fewer_than_sent_is_logged(
    cloudflare_options: Options, caplog: Any
) -> None:
    queue = CloudflareQueue("cf", options=cloudflare_options())
    queue.send_many([{"n": 1}, {"n": 2}])
    first, second = queue.receive(max_messages=2).messages
    first.ack()
    queue.settle([first])
    second.ack()
    with caplog.at_level(logging.WARNING, logger="astral_taskclaim"):
        # The first lease was used already: Cloudflare counts 1 ack of 2.
        queue.settle([first, second])
    [short] = [r for r in caplog.records if getattr(r, "event", "") == "queue.settle_short"]
    assert (short.acks, short.ack_count, short.retries, short.retry_count) == (2, 1, 0, 0)
    assert "lease ids were not found" in short.getMessage()
