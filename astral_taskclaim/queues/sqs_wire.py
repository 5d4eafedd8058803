"""What the SQS backend sends and reads: bodies as SQS takes them, received
messages and their receipts, the entries of the settle and lease batch
calls, and the errors AWS returns."""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from astral_taskclaim.core.redaction import redacting_filter
from astral_taskclaim.queues import options as opts
from astral_taskclaim.queues.base import QueueError
from astral_taskclaim.queues.messages import ReceivedMessage
from astral_taskclaim.queues.remote import EntriesRefusedError, RequestRefusedError

logger = logging.getLogger(__name__)
logger.addFilter(redacting_filter)

# Characters SQS refuses in a body; they can only occur inside JSON strings,
# where a \\u escape denotes the same text.
_NOT_ALLOWED = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
#: Error codes of a send that SQS refused for what the bodies hold (one over
#: the queue's MaximumMessageSize, say): sent again, they are refused again.
_REFUSED_SEND_CODES = frozenset(
    {"InvalidParameterValue", "InvalidMessageContents", "BatchRequestTooLong"}
)


def sqs_text(data: bytes) -> str:
    """UTF-8 JSON ``data`` as SQS takes it: characters it refuses as ``\\u`` escapes."""
    return _NOT_ALLOWED.sub(lambda match: f"\\u{ord(match[0]):04x}", data.decode("utf-8"))


def call_sqs(
    label: str,
    redact: Callable[[str], str],
    operation: str,
    call: Callable[..., Any],
    **kwargs: Any,
) -> Any:
    """``call(**kwargs)``, the boto3 method of SQS ``operation``; its errors
    raised as :class:`QueueError` naming ``label`` and the operation,
    passed through ``redact``; a send refused for what it holds as
    :class:`RequestRefusedError`."""
    try:
        return call(**kwargs)
    except ClientError as error:
        details = error.response.get("Error", {})
        code, message = _unwrap(str(details.get("Code", "")), str(details.get("Message", "")))
        # JSON-protocol codes may come prefixed: AWS.SimpleQueueService.<code>.
        refused = operation.startswith("Send") and code.rsplit(".")[-1] in _REFUSED_SEND_CODES
        kind = RequestRefusedError if refused else QueueError
        raise kind(redact(f"{label}: {operation}: {code}: {message}")) from error
    except BotoCoreError as error:
        raise QueueError(redact(f"{label}: {operation}: {error}")) from error


def _unwrap(code: str, message: str) -> tuple[str, str]:
    """Code and message of an error some servers send as an XML document."""
    if "<Code>" in message:
        found_code = re.search(r"<Code>(.*?)</Code>", message)
        found_message = re.search(r"<Message>(.*?)</Message>", message, re.DOTALL)
        code = found_code[1] if found_code else code
        message = found_message[1] if found_message else message
    return code, message


@dataclass(frozen=True)
class Receipt:
    """An SQS receipt handle and when it was received (``time.monotonic``)."""

    handle: str
    received_at: float


def decode_message(alias: str, item: dict[str, Any], received_at: float) -> ReceivedMessage:
    """The ``ReceiveMessage`` entry ``item`` of queue ``alias`` as a message;
    a body that is not JSON is kept as its text (and logged) for the
    consumer to count as malformed."""
    raw = item.get("Body", "")
    try:
        body: Any = json.loads(raw)
    except (ValueError, RecursionError) as error:  # too deep: malformed
        body = raw
        logger.warning(
            "%s message %s is not JSON: %s",
            alias,
            item.get("MessageId"),
            error,
            extra={"event": "queue.body_undecodable", "queue": alias},
        )
    attempts = int(item.get("Attributes", {}).get("ApproximateReceiveCount", 1))
    return ReceivedMessage(
        body=body,
        attempts=attempts,
        receipt=Receipt(item["ReceiptHandle"], received_at),
        id=str(item.get("MessageId", "")),
    )


def raise_partly_sent(alias: str, response: dict[str, Any], *, later: range) -> None:
    """:class:`EntriesRefusedError` for the entries of a ``SendMessageBatch``
    that SQS refused (for good when ``SenderFault``), and the bodies of
    ``later`` calls not made."""
    entries = response.get("Failed", [])
    if entries:
        reasons = {int(e["Id"]): f"{e.get('Code')}: {e.get('Message')}" for e in entries}
        for_good = {int(e["Id"]) for e in entries if e.get("SenderFault")}
        listed = "; ".join(f"{position}: {reason}" for position, reason in reasons.items())
        raise EntriesRefusedError(
            f"SQS queue {alias!r}: SendMessageBatch refused {listed}",
            unsent=sorted(set(reasons) | set(later)),
            refused={p: reason for p, reason in reasons.items() if p in for_good},
            failed={p: reason for p, reason in reasons.items() if p not in for_good},
        )


def failure(entry: dict[str, Any], messages: Sequence[ReceivedMessage]) -> str:
    """One refused entry of a batch call over ``messages``, as text."""
    return f"{messages[int(entry['Id'])].id}: {entry.get('Code')}: {entry.get('Message')}"


def visibility(seconds: int, receipt: Receipt, now: float, limit: int) -> int:
    """``seconds`` of visibility from ``now`` for the message of ``receipt``,
    within SQS's ``limit`` (12 hours), which it counts from the receive."""
    room = limit - math.ceil(now - receipt.received_at)
    return max(min(seconds, room), 0)


def settle_entries(
    messages: Sequence[ReceivedMessage], limit: int, now: float
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``DeleteMessageBatch`` entries of the acked ``messages`` and the
    ``ChangeMessageVisibilityBatch`` entries of the retried ones, each
    ``Id`` the message's position; ``ValueError`` for a message that another
    backend received."""
    acks: list[dict[str, Any]] = []
    retries: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        receipt = message.receipt
        if message.settlement is None:
            continue
        if not isinstance(receipt, Receipt):
            raise ValueError(f"message {message.id!r} was not received from an SQSQueue")
        entry = {"Id": str(index), "ReceiptHandle": receipt.handle}
        if message.settlement == "ack":
            acks.append(entry)
        elif message.settlement == "retry":
            delay = opts.whole_delay_seconds(message.delay_seconds, limit)
            retries.append({**entry, "VisibilityTimeout": visibility(delay, receipt, now, limit)})
    return acks, retries


def lease_entries(
    messages: Sequence[ReceivedMessage], seconds: int, limit: int, now: float
) -> list[dict[str, Any]]:
    """The ``ChangeMessageVisibilityBatch`` entries hiding each of
    ``messages`` (received from SQS) ``seconds`` from ``now``, within
    ``limit``; each ``Id`` is the message's position."""
    return [
        {
            "Id": str(index),
            "ReceiptHandle": message.receipt.handle,
            "VisibilityTimeout": visibility(seconds, message.receipt, now, limit),
        }
        for index, message in enumerate(messages)
    ]
