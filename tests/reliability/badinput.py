"""What the bad-input tests share: the rows in place while a bad call is
made (a live claim, an expired one that any stray claim of its key would
replace, a queued message) and :func:`rejected`, which makes the call and
checks that it raised the expected error and wrote nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from astral_taskclaim.queues.messages import MessageBatch, ReceivedMessage
from astral_taskclaim.queues.postgres import PostgresQueue
from tests.reliability.support import table_snapshot

QUEUE = {
    "bad": {
        "BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue",
        "OPTIONS": {"queue_name": "bad-input"},
    }
}
TOKEN = "6f1c2a4e-8d3b-4f7a-9c21-5e0b7d9a3f10"
HUGE = "k" * 100_000
SURROGATE = "caf\udce9"  # b"caf\xe9" (Latin-1) read as UTF-8 with surrogateescape
WRONG_TYPES = [None, 42, 4.2, b"project:42", ["project:42"], {"k": 1}]


def rejected(call: Callable[[], object], error: type[Exception], match: str) -> None:
    """``call()`` raises ``error`` matching ``match`` and writes nothing."""
    before = table_snapshot()
    assert (len(before[0]), len(before[1])) == (2, 1)
    with pytest.raises(error, match=match):
        call()
    assert table_snapshot() == before


def queue() -> PostgresQueue:
    """The PostgreSQL queue ``populated`` put a message on."""
    return PostgresQueue("bad", options={"queue_name": "bad-input"})


def batch() -> MessageBatch:
    """A batch whose one message, if it were run and failed for good,
    would release the live claim ``k``."""
    body = {"key": "k", "claim": TOKEN, "windowSeconds": 60, "task": {}}
    return MessageBatch("bad", [ReceivedMessage(body=body, attempts=99, receipt=None)])
