"""Secrets redacted in every shape text can give them: raw, ``repr``,
escaped, JSON, percent-encoded; in log records, tracebacks and the
worker's error log."""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import quote, quote_plus

import httpx
import pytest
from django.test import override_settings

from astral_taskclaim.core import redaction
from astral_taskclaim.core.redaction import (
    REDACTED,
    _configured_secrets,
    _representations,
    redact,
    redacting_filter,
)
from astral_taskclaim.queues.base import QueueError
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.queues.messages import MessageBatch
from astral_taskclaim.tasks import TaskRegistry
from astral_taskclaim.worker import loop as worker_module
from astral_taskclaim.worker.loop import Worker
from tests.queues.cloudflare_server import CloudflareQueuesServer

AWKWARD = [
    "tok\n",
    "tok\r\n",
    'to"ken',
    "to'ken",
    "to\\ken",
    "tøken€",
    "a b%2F&=+/?#:@",
    "\ttab",
]


def shapes(secret: str) -> list[str]:
    """How libraries and formatters write ``secret`` into text."""
    return [
        secret,
        repr(secret),
        repr(secret.encode()),
        f"b'Bearer {secret}'",
        repr(f"Bearer {secret}".encode()),
        json.dumps(secret),
        json.dumps({"token": secret}, ensure_ascii=False),
        quote(secret),
        quote(secret, safe=""),
        quote_plus(secret),
        secret.encode("unicode_escape").decode(),
    ]


@pytest.mark.parametrize("secret", AWKWARD)
def test_every_shape_of_a_secret_is_redacted(secret: str) -> None:
    for shape in shapes(secret):
        text = f"call failed: {shape} (retrying)"
        clean = redact(text, [secret])
        assert REDACTED in clean, shape
        leftovers = [r for r in _representations(secret) if len(r) > 2 and r in clean]
        assert leftovers == [], (shape, clean)
    assert redact("nothing here", [secret]) == "nothing here"
    assert redact("untouched", []) == "untouched"


def test_the_header_error_httpx_raises_is_redacted(
    cloudflare_server: CloudflareQueuesServer,
) -> None:
    secret = "tok-0123456789\n"
    with (
        httpx.Client(headers={"Authorization": f"Bearer {secret}"}) as client,
        pytest.raises(httpx.LocalProtocolError) as caught,
    ):
        client.post(f"{cloudflare_server.base_url}/accounts/x/queues/y/messages")
    shown = str(caught.value)
    assert "tok-0123456789" in shown  # the exact-text check misses it: it is escaped
    assert "tok-0123456789" not in redact(shown, [secret])


def queues_with(token: str) -> dict[str, Any]:
    return {
        "cf": {
            "BACKEND": "astral_taskclaim.queues.cloudflare.CloudflareQueue",
            "OPTIONS": {"account_id": "a", "queue_id": "q", "api_token": token},
        }
    }


def test_configured_secrets_come_from_databases_queues_and_queue_objects() -> None:
    class Holder:
        def credentials(self) -> list[str]:
            return ["held-secret"]

    with override_settings(TASKCLAIM_QUEUES=queues_with("cf-token-123")):
        found = _configured_secrets(Holder(), object())
    assert {"cf-token-123", "held-secret"} <= set(found)


def test_the_log_filter_gathers_the_secrets_once_per_settings_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = []
    gather = redaction._configured_secrets

    def counting() -> list[str]:
        calls.append(1)
        return gather()

    monkeypatch.setattr(redaction, "_configured_secrets", counting)
    record = logging.LogRecord("tests", logging.INFO, __file__, 1, "tok-one tok-two", None, None)
    with override_settings(TASKCLAIM_QUEUES=queues_with("tok-one")):
        for _ in range(3):
            redacting_filter.filter(record)
        assert record.getMessage() == f"{REDACTED} tok-two"
        with override_settings(TASKCLAIM_QUEUES=queues_with("tok-two")):
            redacting_filter.filter(record)
            assert record.getMessage() == f"{REDACTED} {REDACTED}"
    assert len(calls) == 2


def test_the_log_filter_redacts_messages_and_tracebacks(caplog: Any) -> None:
    token = 'cf"tok\\en-0123'
    logger = logging.getLogger("tests.redaction")
    logger.addFilter(redacting_filter)
    try:
        with (
            override_settings(TASKCLAIM_QUEUES=queues_with(token)),
            caplog.at_level(logging.INFO, logger="tests.redaction"),
        ):
            try:
                raise ValueError(f"header {token.encode()!r} refused")
            except ValueError:
                logger.exception("send failed: %r", token)
            logger.info("nothing secret")
    finally:
        logger.removeFilter(redacting_filter)
    failed, plain = caplog.records
    assert failed.getMessage() == f"send failed: '{REDACTED}'"
    assert failed.exc_info is None
    assert "ValueError: header b'[redacted]' refused" in (failed.exc_text or "")
    assert "0123" not in caplog.text
    assert plain.getMessage() == "nothing secret"


class FailingQueue(MemoryQueue):
    """A memory queue whose first receive fails quoting its credential."""

    secret = "aws-secret/with+slash"

    def credentials(self) -> list[str]:
        return [self.secret]

    def receive(self, *, max_messages: int, wait_seconds: float = 0) -> MessageBatch:
        if not getattr(self, "failed", False):
            self.failed = True
            raise QueueError(f"signing with {quote(self.secret, safe='')} failed")
        return super().receive(max_messages=max_messages, wait_seconds=wait_seconds)


@pytest.mark.django_db(transaction=True)
def test_the_workers_error_log_is_redacted(caplog: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module, "FIRST_BACKOFF", 0.01)
    queue = FailingQueue("jobs", options={"queue_name": "redaction"})
    task = TaskRegistry().task(queue="jobs", name="redaction")(lambda task: None)
    with caplog.at_level(logging.WARNING, logger="astral_taskclaim.worker.loop"):
        stats = Worker("jobs", task=task, backend=queue, wait=0, burst=True).run()
    assert stats.database_errors == 1
    [record] = caplog.records
    assert record.event == "worker.database_error"
    assert f"signing with {REDACTED} failed" in record.getMessage()
    assert "slash" not in caplog.text
