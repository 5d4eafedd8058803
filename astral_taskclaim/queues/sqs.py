"""Amazon SQS with boto3.

::

    TASKCLAIM_QUEUES = {
        "default": {
            "BACKEND": "astral_taskclaim.queues.sqs.SQSQueue",
            "OPTIONS": {
                "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs",
                "region_name": "eu-west-1",
            },
        },
    }

Credentials come from the options or, when those are not given, from
boto3's standard chain (environment, shared files, instance roles). Bodies
are the JSON text :meth:`BaseQueue.encode` produced, unchanged; ``attempts``
is ``ApproximateReceiveCount``. A retry changes the message's visibility,
so its delay may reach 12 hours, while a new message can be delayed 900 s
at most (``DelaySeconds``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError

from astral_taskclaim.core.redaction import redacting_filter
from astral_taskclaim.queues import options as opts
from astral_taskclaim.queues.base import (
    PartlySentError,
    QueueError,
    QueueStatus,
)
from astral_taskclaim.queues.messages import MessageBatch, ReceivedMessage
from astral_taskclaim.queues.options import (
    Problem,
)
from astral_taskclaim.queues.remote import RemoteQueue, chunks
from astral_taskclaim.queues.sqs_options import OPTIONS, SECRETS, option_problems
from astral_taskclaim.queues.sqs_wire import (
    Receipt,
    call_sqs,
    decode_message,
    failure,
    lease_entries,
    raise_partly_sent,
    settle_entries,
    sqs_text,
)

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

logger = logging.getLogger(__name__)
logger.addFilter(redacting_filter)

#: Longest ``DelaySeconds`` of a new message.
_MAX_SEND_DELAY_SECONDS = 900
#: SQS's limit on the bodies of one ``SendMessageBatch`` call.
_MAX_BATCH_BYTES = 256 * 1024


class SQSQueue(RemoteQueue):
    """An SQS standard queue (FIFO queues are refused by :meth:`check`).

    Options: ``queue_url`` (required); ``region_name``, ``endpoint_url``,
    ``aws_access_key_id`` with ``aws_secret_access_key`` (and
    ``aws_session_token``), each left to boto3 when not given;
    ``wait_time_seconds`` (longest long poll per call, 0-20, default 10);
    ``visibility_timeout`` (seconds a received message stays leased,
    default the queue's own); ``outbox`` (default ``False``: send through
    the transactional outbox and its relay, see :mod:`.outbox`).
    """

    max_batch_size = 10
    max_body_bytes = 256 * 1024
    max_send_delay_seconds = _MAX_SEND_DELAY_SECONDS

    option_spec = OPTIONS
    _client: SQSClient | None

    # Configuration

    def check_options(self, config: dict[str, Any]) -> list[Problem]:
        """E013 for half a key pair or a FIFO queue, and the outbox's E015."""
        return super().check_options(config) + option_problems(config)

    def _connect(self) -> tuple[SQSClient, dict[str, Any]]:
        config = self.ensure_configured()
        if self._client is None:
            keys = {name: config[name].reveal() for name in SECRETS if config[name] is not None}
            # The read timeout must outlast the longest long poll.
            timeouts = Config(
                connect_timeout=10,
                read_timeout=config["wait_time_seconds"] + 20,
                retries={"mode": "standard"},
            )
            try:
                session = boto3.session.Session(region_name=config["region_name"], **keys)
                self._client = session.client(
                    "sqs", endpoint_url=config["endpoint_url"], config=timeouts
                )
            except BotoCoreError as error:
                raise QueueError(f"SQS queue {self.alias!r}: {error}") from error
        return self._client, config

    def _call(self, operation: str, call: Callable[..., Any], **kwargs: Any) -> Any:
        return call_sqs(f"SQS queue {self.alias!r}", self.redact, operation, call, **kwargs)

    def status(self) -> QueueStatus:
        """``GetQueueAttributes``' approximate counts: visible (ready),
        delayed, and not visible (leased: received, in flight)."""
        client, config = self._connect()
        names = ["ApproximateNumberOf" + name for name in ("Messages", "MessagesDelayed")]
        names.append("ApproximateNumberOfMessagesNotVisible")
        response = self._call(
            "GetQueueAttributes",
            client.get_queue_attributes,
            QueueUrl=config["queue_url"],
            AttributeNames=names,
        )
        ready, delayed, leased = (int(response["Attributes"].get(name, 0)) for name in names)
        return QueueStatus(ready, delayed, leased, details={"approximate": True})

    # Sending

    def encode(self, body: Any) -> bytes:
        """:meth:`BaseQueue.encode`, with the characters SQS refuses escaped
        (see :func:`_sqs_text`) before the size is checked, since escaping
        lengthens the body."""
        data = sqs_text(super().encode(body)).encode("utf-8")
        if len(data) > self.max_body_bytes:
            raise ValueError(
                f"queue {self.alias!r}: body is {len(data)} bytes once escaped for SQS, over "
                f"the {self.max_body_bytes}-byte limit"
            )
        return data

    def deliver_one(self, body: Any, *, delay_seconds: float = 0) -> None:
        """``SendMessage``; ``delay_seconds`` (rounded up) at most 900. With
        no delay, no ``DelaySeconds`` is sent and the queue's own delay
        applies."""
        delay = opts.whole_delay_seconds(delay_seconds, self.max_delay_seconds)
        if delay > _MAX_SEND_DELAY_SECONDS:
            raise ValueError(
                f"queue {self.alias!r}: SQS delays a new message at most "
                f"{_MAX_SEND_DELAY_SECONDS} s, got {delay_seconds}; longer delays are for retries"
            )
        data = self.encode(body).decode("utf-8")
        client, config = self._connect()
        delayed = {"DelaySeconds": delay} if delay else {}
        self._call(
            "SendMessage",
            client.send_message,
            QueueUrl=config["queue_url"],
            MessageBody=data,
            **delayed,
        )

    def deliver(self, encoded: Sequence[bytes]) -> None:
        """Sends ``encoded`` bodies with ``SendMessageBatch``: one call per
        10 bodies or 256 KB. Several calls are not atomic: when only some
        bodies were sent (entries in SQS's ``Failed`` list, or a later call
        failing), :class:`PartlySentError` names the others."""
        client, config = self._connect()
        start = 0
        for chunk in chunks(encoded, self.max_batch_size, _MAX_BATCH_BYTES):
            # Ids are positions in ``bodies``, so SQS's ``Failed`` list names them.
            entries = [
                {"Id": str(start + offset), "MessageBody": data.decode("utf-8")}
                for offset, data in enumerate(chunk)
            ]
            try:
                response = self._call(
                    "SendMessageBatch",
                    client.send_message_batch,
                    QueueUrl=config["queue_url"],
                    Entries=entries,
                )
            except QueueError as error:
                if not start:
                    raise
                raise PartlySentError(str(error), unsent=range(start, len(encoded))) from error
            start += len(chunk)
            raise_partly_sent(self.alias, response, later=range(start, len(encoded)))

    # Receiving and settling

    def receive(self, *, max_messages: int, wait_seconds: float = 0) -> MessageBatch:
        """``ReceiveMessage`` with long polling, at most ``wait_time_seconds``
        per call, until a message arrives or ``wait_seconds`` pass."""
        count = opts.max_messages(max_messages, self.max_batch_size)
        deadline = time.monotonic() + opts.wait_seconds(wait_seconds)
        client, config = self._connect()
        request: dict[str, Any] = {
            "QueueUrl": config["queue_url"],
            "MaxNumberOfMessages": count,
            "MessageSystemAttributeNames": ["ApproximateReceiveCount"],
        }
        if config["visibility_timeout"] is not None:
            request["VisibilityTimeout"] = config["visibility_timeout"]
        while True:
            remaining = deadline - time.monotonic()
            poll = min(math.ceil(max(remaining, 0)), config["wait_time_seconds"])
            response = self._call(
                "ReceiveMessage", client.receive_message, WaitTimeSeconds=poll, **request
            )
            received_at = time.monotonic()
            messages = [
                decode_message(self.alias, item, received_at)
                for item in response.get("Messages", [])
            ]
            if messages or deadline - time.monotonic() <= 0:
                return MessageBatch(self.alias, messages)

    def settle(self, messages: Sequence[ReceivedMessage]) -> None:
        """``DeleteMessageBatch`` for the acks and
        ``ChangeMessageVisibilityBatch`` for the retries, 10 per call."""
        client, _ = self._connect()
        acks, retries = settle_entries(messages, self.max_delay_seconds, time.monotonic())
        failed: list[str] = []
        stale = 0
        calls = (
            ("DeleteMessageBatch", client.delete_message_batch, acks),
            ("ChangeMessageVisibilityBatch", client.change_message_visibility_batch, retries),
        )
        for operation, call, entries in calls:
            for response in self._batch_calls(operation, call, entries):
                for entry in response.get("Failed", []):
                    # The lease ran out and the message was delivered again:
                    # the new delivery settles it.
                    if entry.get("Code") == "MessageNotInflight":
                        stale += 1
                    else:
                        failed.append(failure(entry, messages))
        if stale:
            self._log_stale_settlements(stale, advice="raise visibility_timeout")
        if failed:
            logger.error(
                "%s: %d messages not settled: %s",
                self.alias,
                len(failed),
                "; ".join(failed),
                extra={"event": "queue.settle_failed", "queue": self.alias},
            )
            raise QueueError(f"SQS queue {self.alias!r}: not settled: {'; '.join(failed)}")

    # Lease extension

    supports_lease_extension = True
    _queue_visibility: int | None = None

    def lease_seconds(self) -> float:
        """``visibility_timeout``, or the queue's own ``VisibilityTimeout``
        (one ``GetQueueAttributes`` call, remembered)."""
        client, config = self._connect()
        if config["visibility_timeout"] is not None:
            return float(config["visibility_timeout"])
        if self._queue_visibility is None:
            response = self._call(
                "GetQueueAttributes",
                client.get_queue_attributes,
                QueueUrl=config["queue_url"],
                AttributeNames=["VisibilityTimeout"],
            )
            self._queue_visibility = int(response["Attributes"]["VisibilityTimeout"])
        return float(self._queue_visibility)

    def extend_leases(
        self, messages: Sequence[ReceivedMessage], *, seconds: float
    ) -> list[ReceivedMessage]:
        """``ChangeMessageVisibilityBatch``, 10 per call: each message is
        hidden ``seconds`` (rounded up) from now, within SQS's 12 hours from
        its receive. Returns those SQS changed; one it refuses (its receipt
        handle no longer current) is left to its current consumer."""
        whole = math.ceil(opts.lease_seconds(seconds, self.max_delay_seconds))
        receipts = [message.receipt for message in messages]
        if not all(isinstance(receipt, Receipt) for receipt in receipts):
            raise ValueError("extend_leases: a message was not received from an SQSQueue")
        client, _ = self._connect()
        entries = lease_entries(messages, whole, self.max_delay_seconds, time.monotonic())
        operation = "ChangeMessageVisibilityBatch"
        responses = self._batch_calls(operation, client.change_message_visibility_batch, entries)
        return [messages[int(e["Id"])] for r in responses for e in r.get("Successful", [])]

    def _batch_calls(
        self, operation: str, call: Callable[..., Any], entries: list[dict[str, Any]]
    ) -> Iterator[dict[str, Any]]:
        """The responses of ``call`` over ``entries``, 10 per call."""
        _, config = self._connect()
        for start in range(0, len(entries), self.max_batch_size):
            chunk = entries[start : start + self.max_batch_size]
            yield self._call(operation, call, QueueUrl=config["queue_url"], Entries=chunk)
