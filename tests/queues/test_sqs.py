"""The SQS backend against moto's server over HTTP: the calls it makes,
long delays through the visibility timeout, errors and secrets."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from moto.sqs.models import sqs_backends

from astral_taskclaim.checks import check_queues
from astral_taskclaim.queues.base import QueueError
from astral_taskclaim.queues.messages import ReceivedMessage
from astral_taskclaim.queues.sqs import Receipt, SQSQueue

from .servers import MotoSQS, recorded

TS_ENVELOPE = (
    '{"key":"project:42","claim":"6f1c2a4e-8d3b-4f7a-9c21-5e0b7d9a3f10",'
    '"windowSeconds":300,"task":{"id":42}}'
)


def moto_message_visible_in(queue_url: str) -> float:
    """Seconds until the queue's only message is visible, per moto."""
    name = queue_url.rsplit("/", 1)[-1]
    [message] = sqs_backends["123456789012"]["us-east-1"].queues[name]._messages
    return (message.visible_at - time.time() * 1000) / 1000


def test_a_retry_past_900_seconds_changes_the_visibility(moto_sqs: MotoSQS) -> None:
    url = moto_sqs.create_queue()
    queue = SQSQueue("sqs", options=moto_sqs.options(url))
    calls = recorded(queue)
    queue.send({"n": 1})
    [message] = queue.receive(max_messages=1, wait_seconds=1).messages
    message.retry(delay_seconds=3600)
    queue.settle([message])
    assert calls[-1] == (
        "ChangeMessageVisibilityBatch",
        {
            "QueueUrl": url,
            "Entries": [
                {"Id": "0", "ReceiptHandle": message.receipt.handle, "VisibilityTimeout": 3600}
            ],
        },
    )
    assert 3590 <= moto_message_visible_in(url) <= 3600


def test_a_retry_stays_within_12_hours_of_the_receive(moto_sqs: MotoSQS) -> None:
    url = moto_sqs.create_queue()
    queue = SQSQueue("sqs", options=moto_sqs.options(url))
    calls = recorded(queue)
    queue.send({"n": 1})
    [message] = queue.receive(max_messages=1, wait_seconds=1).messages
    # As if the message had been leased for 100 s already.
    message.receipt = Receipt(message.receipt.handle, message.receipt.received_at - 100)
    message.retry(delay_seconds=43_200)
    queue.settle([message])
    [entry] = calls[-1][1]["Entries"]
    assert 43_099 <= entry["VisibilityTimeout"] <= 43_100


def test_send_delays_are_whole_seconds_up_to_900(moto_sqs: MotoSQS) -> None:
    url = moto_sqs.create_queue()
    queue = SQSQueue("sqs", options=moto_sqs.options(url))
    calls = recorded(queue)
    with pytest.raises(ValueError, match="at most 900 s"):
        queue.send({"n": 1}, delay_seconds=901)
    assert calls == []
    queue.send({"n": 1}, delay_seconds=2.1)
    assert calls[-1][1]["DelaySeconds"] == 3
    # No delay asked: none sent, so the queue's own default delay applies.
    queue.send({"n": 2})
    assert "DelaySeconds" not in calls[-1][1]


def test_receive_long_polls_at_most_wait_time_seconds_per_call(moto_sqs: MotoSQS) -> None:
    url = moto_sqs.create_queue()
    queue = SQSQueue("sqs", options=moto_sqs.options(url, wait_time_seconds=1))
    calls = recorded(queue)
    started = time.monotonic()
    assert queue.receive(max_messages=10, wait_seconds=2.5).messages == []
    assert time.monotonic() - started >= 2.5
    polls = [params for operation, params in calls if operation == "ReceiveMessage"]
    assert len(polls) >= 3
    assert {params["WaitTimeSeconds"] for params in polls} <= {0, 1}
    assert all(
        params["MessageSystemAttributeNames"] == ["ApproximateReceiveCount"] for params in polls
    )
    assert not any("AttributeNames" in params for params in polls)  # the deprecated name
    assert all(params["MaxNumberOfMessages"] == 10 for params in polls)


def test_settle_is_one_delete_and_one_visibility_call_per_batch(moto_sqs: MotoSQS) -> None:
    url = moto_sqs.create_queue()
    queue = SQSQueue("sqs", options=moto_sqs.options(url))
    queue.send_many([{"n": n} for n in range(10)])
    messages: list[ReceivedMessage] = []
    while len(messages) < 10:
        messages += queue.receive(max_messages=10 - len(messages), wait_seconds=1).messages
    calls = recorded(queue)
    for message in messages[:6]:
        message.ack()
    for message in messages[6:8]:
        message.retry(delay_seconds=60)
    queue.settle(messages)  # two left unsettled
    assert [(operation, len(params["Entries"])) for operation, params in calls] == [
        ("DeleteMessageBatch", 6),
        ("ChangeMessageVisibilityBatch", 2),
    ]
    queue.settle([])
    assert len(calls) == 2


def test_settle_failures_raise_after_trying_everything(moto_sqs: MotoSQS, caplog: Any) -> None:
    url = moto_sqs.create_queue()
    queue = SQSQueue("sqs", options=moto_sqs.options(url))
    queue.send({"n": 1})
    [good] = queue.receive(max_messages=1, wait_seconds=1).messages
    stale = ReceivedMessage({"n": 2}, 1, receipt=Receipt("not-a-handle", time.monotonic()), id="m2")
    good.ack()
    stale.ack()
    with (
        caplog.at_level(logging.ERROR, logger="astral_taskclaim"),
        pytest.raises(QueueError, match="m2: ReceiptHandleIsInvalid"),
    ):
        queue.settle([good, stale])
    assert [record.event for record in caplog.records] == ["queue.settle_failed"]
    assert moto_sqs.client().receive_message(QueueUrl=url).get("Messages") is None


def test_bodies_are_the_json_text_both_ways(moto_sqs: MotoSQS) -> None:
    url = moto_sqs.create_queue()
    queue = SQSQueue("sqs", options=moto_sqs.options(url))
    raw = moto_sqs.client()
    raw.send_message(QueueUrl=url, MessageBody=TS_ENVELOPE)
    [message] = queue.receive(max_messages=1, wait_seconds=1).messages
    assert json.dumps(message.body, separators=(",", ":")) == TS_ENVELOPE
    message.ack()
    queue.settle([message])
    queue.send(json.loads(TS_ENVELOPE))
    [sent] = raw.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert sent["Body"] == TS_ENVELOPE


def test_characters_sqs_refuses_are_escaped_and_come_back(moto_sqs: MotoSQS) -> None:
    url = moto_sqs.create_queue()
    queue = SQSQueue("sqs", options=moto_sqs.options(url))
    body = {"text": "a\ufffeb\uffff", "emoji": "☕"}
    queue.send(body)
    [message] = queue.receive(max_messages=1, wait_seconds=1).messages
    assert message.body == body


def test_a_body_that_is_not_json_is_delivered_as_text(moto_sqs: MotoSQS, caplog: Any) -> None:
    url = moto_sqs.create_queue()
    moto_sqs.client().send_message(QueueUrl=url, MessageBody="not json")
    queue = SQSQueue("sqs", options=moto_sqs.options(url))
    with caplog.at_level(logging.WARNING, logger="astral_taskclaim"):
        [message] = queue.receive(max_messages=1, wait_seconds=1).messages
    assert message.body == "not json"
    assert [r.event for r in caplog.records if r.levelno >= logging.WARNING] == [
        "queue.body_undecodable"
    ]


def test_credentials_from_the_environment(moto_sqs: MotoSQS, monkeypatch: Any) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", moto_sqs.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", moto_sqs.secret_access_key)
    monkeypatch.setenv("AWS_DEFAULT_REGION", moto_sqs.region_name)
    url = moto_sqs.create_queue()
    queue = SQSQueue("sqs", options={"queue_url": url, "endpoint_url": moto_sqs.endpoint_url})
    queue.send({"n": 1})
    [message] = queue.receive(max_messages=1, wait_seconds=1).messages
    assert message.body == {"n": 1}


def test_no_credentials_anywhere_is_a_clear_error(
    moto_sqs: MotoSQS, monkeypatch: Any, tmp_path: Any
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-role lookup
    url = moto_sqs.create_queue()
    options = {"queue_url": url, "endpoint_url": moto_sqs.endpoint_url, "region_name": "us-east-1"}
    with pytest.raises(QueueError, match="SendMessage: Unable to locate credentials"):
        SQSQueue("sqs", options=options).send({"n": 1})


def test_options_are_checked_before_any_call() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"\['queue_url'\] is required"):
        SQSQueue("sqs", options={}).send({"n": 1})
    queues_setting = {
        "sqs": {
            "BACKEND": "astral_taskclaim.queues.sqs.SQSQueue",
            "OPTIONS": {
                "queue_url": "sqs://nope",
                "aws_access_key_id": "AKIAEXAMPLE",
                "wait_time_seconds": 21,
                "region": "eu-west-1",
            },
        }
    }
    with override_settings(TASKCLAIM_QUEUES=queues_setting):
        found = sorted((message.id, message.msg) for message in check_queues())
    owner = "TASKCLAIM_QUEUES['sqs']['OPTIONS']"
    assert [message_id for message_id, _ in found] == [
        "astral_taskclaim.E013",
        "astral_taskclaim.E013",
        "astral_taskclaim.E013",
        "astral_taskclaim.E014",
    ]
    assert {message for _, message in found} == {
        f"{owner}['queue_url'] must be an http:// or https:// URL, got 'sqs://nope'",
        f"{owner}['wait_time_seconds'] must be an integer in [0, 20], got 21",
        f"{owner} needs both aws_access_key_id and aws_secret_access_key, or neither",
        f"{owner} has unknown option 'region'; known: aws_access_key_id, aws_secret_access_key, "
        "aws_session_token, endpoint_url, outbox, queue_url, region_name, visibility_timeout, "
        "wait_time_seconds",
    }
    assert "AKIAEXAMPLE" not in repr(found)
    with override_settings(TASKCLAIM_QUEUES={}):
        assert SQSQueue("e", options={"queue_url": "https://x"}).check() == []


def test_secrets_never_show_in_logs_reprs_or_errors(moto_sqs: MotoSQS, caplog: Any) -> None:
    url = moto_sqs.create_queue()
    options = moto_sqs.options(url, aws_session_token="session-token-0123456789")
    queue = SQSQueue("sqs", options=moto_sqs.options(url))
    missing = SQSQueue("sqs", options=moto_sqs.options(f"{url}-gone"))
    errors: list[str] = []
    with caplog.at_level(logging.DEBUG):
        queue.send({"n": 1})
        queue.send_many([{"n": 2}, {"n": 3}])
        batch = queue.receive(max_messages=10, wait_seconds=1)
        for message in batch.messages:
            message.ack()
        queue.settle(batch.messages)
        for broken in (missing, SQSQueue("sqs", options=options)):
            with pytest.raises(QueueError) as caught:
                broken.send({"n": 4})
            errors += [str(caught.value), repr(caught.value)]
    assert "botocore.endpoint" in {record.name for record in caplog.records}
    shown = [caplog.text, repr(queue), str(queue.options), repr(batch), *errors]
    shown += [repr(record.__dict__) for record in caplog.records]
    # The secret key is only ever used to sign: it shows nowhere, not even in
    # botocore's debug logs.
    assert not [text for text in shown if moto_sqs.secret_access_key in text]
    # A session token is a request header, which botocore itself logs at
    # DEBUG; this package never shows it, nor the key id.
    ours = [r for r in caplog.records if r.name.startswith("astral_taskclaim")]
    for credential in ("session-token-0123456789", moto_sqs.access_key_id):
        assert credential not in repr([r.__dict__ for r in ours]) + repr(errors)
        assert credential not in repr(queue) + str(queue.options) + repr(batch)


def test_settling_a_message_from_another_backend_is_refused(moto_sqs: MotoSQS) -> None:
    queue = SQSQueue("sqs", options=moto_sqs.options(moto_sqs.create_queue()))
    calls = recorded(queue)
    foreign = ReceivedMessage({"n": 1}, 1, receipt="lease-id", id="x")
    foreign.retry(delay_seconds=5)
    with pytest.raises(ValueError, match="'x' was not received from an SQSQueue"):
        queue.settle([foreign])
    assert calls == []


def test_status_reports_the_approximate_counts(moto_sqs: MotoSQS) -> None:
    url = moto_sqs.create_queue()
    queue = SQSQueue("sqs", options=moto_sqs.options(url))
    queue.send_many([1, 2])
    queue.send(3, delay_seconds=60)
    queue.receive(max_messages=1)
    found = queue.status()
    assert (found.ready, found.delayed, found.leased) == (1, 1, 1)
    assert found.details == {"approximate": True}


def test_leases_are_extended_in_one_visibility_call_per_ten(moto_sqs: MotoSQS) -> None:
    url = moto_sqs.create_queue(VisibilityTimeout="45")
    queue = SQSQueue("sqs", options=moto_sqs.options(url))
    calls = recorded(queue)
    assert queue.lease_seconds() == 45  # the queue's own, asked once
    assert queue.lease_seconds() == 45
    assert [operation for operation, _ in calls] == ["GetQueueAttributes"]
    queue.send({"n": 1})
    [message] = queue.receive(max_messages=1, wait_seconds=1).messages
    # As if the message had been leased for 100 s already: the 12 hours
    # SQS allows count from the receive.
    message.receipt = Receipt(message.receipt.handle, message.receipt.received_at - 100)
    assert queue.extend_leases([message], seconds=43_200) == [message]
    assert calls[-1][0] == "ChangeMessageVisibilityBatch"
    [entry] = calls[-1][1]["Entries"]
    assert 43_099 <= entry["VisibilityTimeout"] <= 43_100
    assert queue.extend_leases([message], seconds=29.2) == [message]
    assert calls[-1][1]["Entries"][0]["VisibilityTimeout"] == 30  # whole seconds, rounded up
    configured = SQSQueue("sqs", options=moto_sqs.options(url, visibility_timeout=20))
    assert configured.lease_seconds() == 20
