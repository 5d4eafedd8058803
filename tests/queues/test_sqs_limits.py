"""The SQS backend where SQS differs from a plain queue: batches sent in
part, stale settlements, FIFO queues, escaping before the size check, and
every call checked against botocore's service model."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from botocore.stub import Stubber
from botocore.validate import ParamValidator

from astral_taskclaim.claims.bulk import enqueue_claimed_many
from astral_taskclaim.queues.base import BaseQueue, PartlySentError
from astral_taskclaim.queues.messages import ReceivedMessage
from astral_taskclaim.queues.sqs import Receipt, SQSQueue
from tests.claimkit import claims

from .servers import MotoSQS, recorded


def test_every_call_matches_botocores_service_model(moto_sqs: MotoSQS) -> None:
    url = moto_sqs.create_queue()
    queue = SQSQueue("sqs", options=moto_sqs.options(url, wait_time_seconds=20))
    client, _ = queue._connect()
    # botocore refuses any parameter its model does not describe, client side.
    assert client.meta.config.parameter_validation is not False
    calls = recorded(queue)
    queue.send({"n": 1})
    queue.send({"n": 2}, delay_seconds=5)
    queue.send_many([{"n": 3}, {"n": 4}])
    batch = queue.receive(max_messages=10, wait_seconds=1)
    batch.messages[0].ack()
    for message in batch.messages[1:]:
        message.retry(delay_seconds=60)
    queue.settle(batch.messages)
    validator = ParamValidator()
    for operation, params in calls:
        model = client.meta.service_model.operation_model(operation)
        report = validator.validate(params, model.input_shape)
        assert not report.has_errors(), (operation, report.generate_report())
    assert {operation for operation, _ in calls} == {
        "SendMessage",
        "SendMessageBatch",
        "ReceiveMessage",
        "DeleteMessageBatch",
        "ChangeMessageVisibilityBatch",
    }


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("empty_claims")
def test_entries_sqs_refuses_in_a_batch_release_only_their_claims(moto_sqs: MotoSQS) -> None:
    url = moto_sqs.create_queue()
    queue = SQSQueue("sqs", options=moto_sqs.options(url))
    client, _ = queue._connect()
    items = [(f"sqs-part:{n}", {"n": n}) for n in range(3)]
    with Stubber(client) as stub:  # validates the request against botocore's model
        stub.add_response(
            "send_message_batch",
            {
                "Successful": [
                    {"Id": i, "MessageId": f"m{i}", "MD5OfMessageBody": "0" * 32} for i in "02"
                ],
                "Failed": [{"Id": "1", "SenderFault": False, "Code": "InternalError"}],
            },
        )
        with pytest.raises(PartlySentError, match="1: InternalError") as caught:
            enqueue_claimed_many(queue, items, window_seconds=300)
        stub.assert_no_pending_responses()
    assert caught.value.unsent == (1,)
    assert set(claims()) == {"sqs-part:0", "sqs-part:2"}


def test_a_retry_after_the_lease_ran_out_is_a_stale_settlement(
    moto_sqs: MotoSQS, caplog: Any
) -> None:
    queue = SQSQueue("sqs", options=moto_sqs.options(moto_sqs.create_queue()))
    client, _ = queue._connect()
    messages = [ReceivedMessage({"n": n}, 1, Receipt(f"h{n}", time.monotonic())) for n in (1, 2)]
    for message in messages:
        message.retry(delay_seconds=30)
    # What SQS answers when a message's lease ran out before the retry.
    stale = {"Id": "1", "SenderFault": True, "Code": "MessageNotInflight", "Message": "x"}
    with (
        Stubber(client) as stub,
        caplog.at_level(logging.WARNING, logger="astral_taskclaim"),
    ):
        stub.add_response(
            "change_message_visibility_batch", {"Successful": [{"Id": "0"}], "Failed": [stale]}
        )
        queue.settle(messages)  # no error: the new delivery settles it
    assert [r.event for r in caplog.records] == ["queue.settle_stale"]
    assert caplog.records[0].stale == 1


def test_fifo_queues_are_refused_by_the_check() -> None:
    url = "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs.fifo"
    [error] = SQSQueue("sqs", options={"queue_url": url}).check()
    assert error.id == "astral_taskclaim.E013"
    assert "FIFO queue" in error.msg
    assert "use a standard queue" in error.msg


def test_escaping_counts_toward_the_size_limit(moto_sqs: MotoSQS) -> None:
    url = moto_sqs.create_queue()
    queue = SQSQueue("sqs", options=moto_sqs.options(url))
    calls = recorded(queue)
    # 3 bytes in UTF-8, 6 once escaped as \\ufffe.
    room = queue.max_body_bytes - len(b'{"s":""}')
    body = {"s": "\ufffe" * 10 + "x" * (room - 30)}
    assert len(BaseQueue.encode(queue, body)) == queue.max_body_bytes
    with pytest.raises(ValueError, match="once escaped for SQS, over the 262144-byte limit"):
        queue.send(body)
    fits = {"s": "\ufffe" * 10 + "x" * (room - 60)}
    queue.send(fits)
    assert [operation for operation, _ in calls] == ["SendMessage"]
    [message] = queue.receive(max_messages=1, wait_seconds=1).messages
    assert message.body == fits
