"""The Cloudflare backend at the service's real limits: sizes in decimal
kilobytes with metadata, batches sent in part, ``v8`` bodies, ``429``s that
cannot clear, the send rate limit, the request schema, and tokens an HTTP
header cannot carry."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured

from astral_taskclaim.claims.bulk import enqueue_claimed_many
from astral_taskclaim.queues.base import PartlySentError
from astral_taskclaim.queues.cloudflare import CloudflareError, CloudflareQueue
from tests.claimkit import claims

from .cloudflare_server import CloudflareQueuesServer
from .cloudflare_types import SchemaMismatch, check_request

Options = Callable[..., dict[str, Any]]


def calls(server: CloudflareQueuesServer, queue_id: str, action: str) -> int:
    return sum(r.path.endswith(f"/queues/{queue_id}/messages{action}") for r in server.requests)


def raw_post(options: dict[str, Any], action: str, payload: Any) -> httpx.Response:
    """A request as any REST client would make it, bypassing the backend."""
    url = (
        f"{options['base_url']}/accounts/{options['account_id']}/queues/"
        f"{options['queue_id']}/messages{action}"
    )
    return httpx.post(
        url, json=payload, headers={"Authorization": f"Bearer {options['api_token']}"}
    )


def padded(size: int) -> dict[str, str]:
    """A body whose encoding is exactly ``size`` bytes."""
    return {"s": "x" * (size - len(b'{"s":""}'))}


def test_the_server_counts_kilobytes_of_1000_bytes_with_100_of_metadata(
    cloudflare_options: Options,
) -> None:
    options = cloudflare_options()
    fits, over = "x" * (128_000 - 100 - 2), "x" * (128_000 - 100 - 1)  # JSON adds 2 quotes
    assert raw_post(options, "", {"content_type": "json", "body": fits}).status_code == 200
    refused = raw_post(options, "", {"content_type": "json", "body": over})
    assert (refused.status_code, refused.json()["errors"][0]["code"]) == (400, 10204)
    bodies = [{"content_type": "json", "body": "x" * (128_000 - 100 - 2)}] * 2
    assert raw_post(options, "/batch", {"messages": bodies}).status_code == 200
    bodies.append({"content_type": "json", "body": ""})  # 102 bytes more: over 256,000
    refused = raw_post(options, "/batch", {"messages": bodies})
    assert (refused.status_code, refused.json()["errors"][0]["code"]) == (400, 10205)


def test_send_many_splits_at_256000_bytes_counting_metadata(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options
) -> None:
    options = cloudflare_options()
    queue = CloudflareQueue("cf", options=options)
    assert queue.max_body_bytes == 127_900
    half = 128_000 - 100
    queue.send_many([padded(half), padded(half)])  # 256,000 with metadata: one call
    assert calls(cloudflare_server, options["queue_id"], "/batch") == 1
    queue.send_many([padded(half), padded(half - 1), padded(2)])  # one byte over: two calls
    assert calls(cloudflare_server, options["queue_id"], "/batch") == 3
    assert len(cloudflare_server.stored(options["queue_id"])) == 5


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("empty_claims")
def test_a_batch_sent_in_part_releases_only_the_unsent_claims(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options
) -> None:
    options = cloudflare_options(request_retries=0)
    queue = CloudflareQueue("cf", options=options)
    big = "x" * 100_000
    items = [(f"part:{n}", {"s": big}) for n in range(3)]  # calls of two and one
    cloudflare_server.fail_next(1, status=503, after=1)
    with pytest.raises(PartlySentError, match="2 of 3 bodies had been sent") as caught:
        enqueue_claimed_many(queue, items, window_seconds=300)
    assert caught.value.unsent == (2,)
    assert len(cloudflare_server.stored(options["queue_id"])) == 2
    assert set(claims()) == {"part:0", "part:1"}  # the sent ones keep their claims


def test_v8_messages_are_never_acked_and_reach_the_dead_letter_queue(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options, caplog: Any
) -> None:
    dead_name = f"dead-v8-{time.monotonic_ns()}"
    dead = cloudflare_options(queue_settings={"name": dead_name})
    options = cloudflare_options(
        visibility_timeout=0.05,
        poll_interval=0.05,
        queue_settings={"max_retries": 1, "dead_letter_queue": dead_name},
    )
    cloudflare_server.send_from_worker(options["queue_id"], b"\xff\x0fo\x22\x01k")
    queue = CloudflareQueue("cf", options=options)
    deadline = time.monotonic() + 20
    with caplog.at_level(logging.ERROR, logger="astral_taskclaim"):
        while not cloudflare_server.stored(dead["queue_id"]):
            assert time.monotonic() < deadline, "the v8 message never reached the DLQ"
            assert queue.receive(max_messages=10, wait_seconds=0.2).messages == []
    assert calls(cloudflare_server, options["queue_id"], "/ack") == 0
    [letter] = cloudflare_server.stored(dead["queue_id"])
    assert letter.content_type == "v8"
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert {r.event for r in errors} == {"queue.content_type_unsupported"}
    assert len(errors) == 2  # one per delivery: max_retries 1 allows two
    assert errors[0].content_type == "v8"
    assert "'v8'" in errors[0].getMessage()
    assert "compatibility date of 2024-03-18" in errors[0].getMessage()


@pytest.mark.parametrize(
    ("code", "meaning"),
    [(10251, "storage limit"), (10252, "disabled"), (10253, "free-tier limit")],
)
def test_a_429_that_waiting_cannot_clear_fails_at_once(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options, code: int, meaning: str
) -> None:
    options = cloudflare_options()
    queue = CloudflareQueue("cf", options=options)
    waits: list[float] = []
    queue._sleep = waits.append
    cloudflare_server.fail_next(1, status=429, code=code, retry_after="1")
    with pytest.raises(CloudflareError, match=meaning) as caught:
        queue.send({"n": 1})
    assert (caught.value.status, caught.value.errors[0][0]) == (429, code)
    assert waits == []
    assert calls(cloudflare_server, options["queue_id"], "") == 1


def test_sends_are_rate_limited_with_retry_after_but_pulls_are_not(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options
) -> None:
    options = cloudflare_options(max_backoff_seconds=60)
    cloudflare_server.queues[options["queue_id"]].send_limit = (2, 300.0)
    queue = CloudflareQueue("cf", options=options)
    queue.send({"n": 1})
    queue.send_many([{"n": 2}, {"n": 3}])
    with pytest.raises(CloudflareError, match=r"asked to wait 30\d s .*971"):
        queue.send({"n": 4})
    for expected in (3, 0, 0):  # pulls go on past the send limit
        assert len(queue.receive(max_messages=10).messages) == expected


def test_the_server_refuses_requests_the_sdk_types_do_not_describe(
    cloudflare_options: Options,
) -> None:
    options = cloudflare_options()
    for action, payload in [
        ("", {"content_type": "json", "body": {}, "priority": 1}),
        ("", {"content_type": "v8", "body": "AA=="}),
        ("/batch", {"messages": [{"body": 1, "content_type": "json", "ttl": 5}]}),
        ("/pull", {"batch_size": 5, "visibility_timeout": 1000}),
        ("/ack", {"acks": [{"lease_id": "x"}], "retries": [{"lease_id": 1}]}),
    ]:
        refused = raw_post(options, action, payload)
        assert (refused.status_code, refused.json()["errors"][0]["code"]) == (400, 10207), payload
    with pytest.raises(SchemaMismatch, match="fields the API does not know"):
        check_request("/ack", "a", {"acks": [{"lease_id": "x", "delay_seconds": 1}]})
    check_request("", "a", {"content_type": "json", "body": {"k": [1]}, "delay_seconds": 3})


def test_every_request_the_backend_makes_matches_the_sdk_types(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options
) -> None:
    options = cloudflare_options()
    queue = CloudflareQueue("cf", options=options)
    before = len(cloudflare_server.requests)
    queue.send({"n": 1}, delay_seconds=0)
    queue.send({"n": 2}, delay_seconds=1)
    queue.send_many([{"n": 3}, {"n": 4}])
    batch = queue.receive(max_messages=10)
    batch.messages[0].ack()
    for message in batch.messages[1:]:
        message.retry(delay_seconds=5)
    queue.settle(batch.messages)
    statuses = {
        r.status for r in cloudflare_server.requests[before:] if options["queue_id"] in r.path
    }
    assert statuses == {200}


@pytest.mark.parametrize("token", ["tok-0123\n", "tok-0123\r\n", " tok-0123", "tøk-0123", "to k"])
def test_a_token_no_http_header_can_carry_is_refused_without_showing_it(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options, token: str
) -> None:
    queue = CloudflareQueue("cf", options=cloudflare_options(api_token=token))
    [error] = queue.check()
    assert error.id == "astral_taskclaim.E013"
    assert "['api_token'] must be visible ASCII characters only" in error.msg
    assert "strip it" in error.msg
    before = len(cloudflare_server.requests)
    with pytest.raises(ImproperlyConfigured, match="visible ASCII") as caught:
        queue.send({"n": 1})
    assert len(cloudflare_server.requests) == before
    for shown in (error.msg, str(caught.value)):
        assert "0123" not in shown
        assert shown.endswith("got a str")


def test_a_token_with_quotes_backslashes_and_percent_signs_is_used_as_is(
    cloudflare_server: CloudflareQueuesServer, cloudflare_options: Options, caplog: Any
) -> None:
    token = "to\"k\\en%2F+&=/'x"
    queue = CloudflareQueue("cf", options=cloudflare_options(api_token=token))
    assert queue.check() == []
    with pytest.raises(CloudflareError, match="10000 Authentication error") as caught:
        queue.send({"n": 1})
    assert "en%2F" not in str(caught.value) + caplog.text
