"""No secret in any log record, repr or error message.

With a Cloudflare API token, an AWS key pair and a database password
configured, the test drives every path that reports an error (a refused
token, a wrong signature, 5xx answers and retries, an unreachable server,
a worker whose connections are terminated mid-run) and collects every log
record (the app's from DEBUG, every other library's from INFO), every
``repr`` of the configured objects and every error raised, tracebacks
included. None of them may contain any of the secrets, in any shape text
gives them (raw, ``repr``, escaped, JSON, percent-encoded).

Tokens with characters an HTTP header cannot carry (a newline from a
secret file, non-ASCII text, spaces) are refused before use; tokens with
quotes, backslashes and percent-encodable characters are used as they are.
"""

from __future__ import annotations

import logging
import secrets
import socket
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connections

from astral_taskclaim.checks import check_queues
from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.core.redaction import _representations
from astral_taskclaim.queues.base import BaseQueue
from astral_taskclaim.queues.cloudflare import CloudflareQueue
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.queues.sqs import SQSQueue
from astral_taskclaim.tasks import ClaimedTask, TaskRegistry
from astral_taskclaim.worker.loop import Worker
from tests.claimkit import raw_connection
from tests.queues.cloudflare_server import CloudflareQueuesServer
from tests.queues.servers import MotoSQS
from tests.reliability.support import AS_SERVICE, DB_PASSWORD, SERVICE, record_figures

pytestmark = pytest.mark.usefixtures("clean_tables")


class Everything(logging.Handler):
    """Every record reaching the root logger, as text."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.texts: list[str] = []
        self.events: list[str] = []
        self._formatter = logging.Formatter()

    def emit(self, record: logging.LogRecord) -> None:
        self.texts += [record.getMessage(), repr(record.__dict__)]
        if record.exc_info:
            self.texts.append(self._formatter.formatException(record.exc_info))
        if hasattr(record, "event"):
            self.events.append(record.event)


@pytest.fixture
def everything() -> Iterator[Everything]:
    handler = Everything()
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)  # the app's own loggers stay at DEBUG
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def raised(call: Callable[[], object]) -> list[str]:
    """``call()``'s error as shown: ``str``, ``repr`` and the traceback."""
    try:
        call()
    except Exception as error:
        return [str(error), repr(error), "".join(traceback.format_exception(error))]
    pytest.fail("expected an error")


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def exercise(queue: BaseQueue) -> list[str]:
    """Send, receive and settle on ``queue``; reprs and check messages."""
    assert enqueue_claimed(queue, f"secret:{secrets.token_hex(4)}", {"n": 1}, window_seconds=60)
    batch = queue.receive(max_messages=10, wait_seconds=2)
    for message in batch.messages:
        message.ack()
    queue.settle(batch.messages)
    return [repr(queue), str(queue.options), repr(vars(queue)), repr(batch)] + [
        str(message) for message in queue.check()
    ]


@AS_SERVICE
def test_no_secret_shows_anywhere(
    service: str,
    cloudflare_server: CloudflareQueuesServer,
    moto_sqs: MotoSQS,
    everything: Everything,
) -> None:
    wrong_token = secrets.token_hex(20)
    wrong_secret_key = secrets.token_urlsafe(30)
    # Used as they are: quotes, backslashes and what percent-encoding changes.
    awkward_tokens = [f"{secrets.token_hex(8)}{odd}" for odd in ('"q', "\\b", "'s", "%2F+&=/?")]
    # Refused before use: no HTTP header can carry them.
    unsendable_tokens = [f"{secrets.token_hex(8)}{odd}" for odd in ("\n", "\r\n", "é€", " sp")]
    hidden = [
        cloudflare_server.token,
        wrong_token,
        *awkward_tokens,
        *unsendable_tokens,
        moto_sqs.access_key_id,
        moto_sqs.secret_access_key,
        wrong_secret_key,
        DB_PASSWORD,
    ]
    cf = {
        "account_id": cloudflare_server.account_id,
        "queue_id": cloudflare_server.create_queue(),
        "api_token": cloudflare_server.token,
        "base_url": cloudflare_server.base_url,
        "request_retries": 1,
        "backoff_seconds": 0.01,
        "poll_interval": 0.05,
    }
    sqs = moto_sqs.options(moto_sqs.create_queue(), wait_time_seconds=1)
    shown: list[str] = []

    # The happy paths, then every way each backend can fail.
    shown += exercise(CloudflareQueue("cf", options=cf))
    shown += exercise(SQSQueue("sqs", options=sqs))
    cloudflare_server.fail_next(2, status=502)
    shown += raised(lambda: CloudflareQueue("cf", options=cf).send({"n": 2}))
    shown += raised(
        lambda: CloudflareQueue("cf", options={**cf, "api_token": wrong_token}).send({"n": 3})
    )
    unreachable = f"http://127.0.0.1:{unused_port()}/client/v4"
    shown += raised(
        lambda: enqueue_claimed(
            CloudflareQueue("cf", options={**cf, "base_url": unreachable}),
            "secret:cf",
            {"n": 4},
            window_seconds=60,
        )
    )
    shown += raised(
        lambda: SQSQueue("sqs", options={**sqs, "aws_secret_access_key": wrong_secret_key}).send(
            {"n": 5}
        )
    )
    shown += raised(
        lambda: enqueue_claimed(
            SQSQueue("sqs", options={**sqs, "endpoint_url": f"http://127.0.0.1:{unused_port()}"}),
            "secret:sqs",
            {"n": 6},
            window_seconds=60,
        )
    )
    for token in awkward_tokens:
        shown += raised(
            lambda token=token: CloudflareQueue("cf", options={**cf, "api_token": token}).send(
                {"n": 3}
            )
        )
    for token in unsendable_tokens:
        broken = CloudflareQueue("cf", options={**cf, "api_token": token})
        shown += [m.msg for m in broken.check()]
        shown += raised(lambda broken=broken: enqueue_claimed(broken, "k", {}, window_seconds=60))
        shown += [repr(broken), str(broken.options), repr(vars(broken))]
    for name, value in (("api_token", 42), ("timeout", "soon")):
        shown += [m.msg for m in CloudflareQueue("cf", options={**cf, name: value}).check()]
    shown += [m.msg for m in SQSQueue("sqs", options={**sqs, "aws_access_key_id": None}).check()]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            "django.conf.settings.TASKCLAIM_QUEUES",
            {
                "cf": {
                    "BACKEND": "astral_taskclaim.queues.cloudflare.CloudflareQueue",
                    "OPTIONS": {**cf, "api_token": 1},
                }
            },
            raising=False,
        )
        shown += [m.msg for m in check_queues()]

    # A worker as the service role (password login), its connections
    # terminated in the middle of a run.
    queue = PostgresQueue("pg", options={"queue_name": "secrets", "poll_interval": 0.1})
    shown += exercise(queue)

    def run(task: Any) -> None:
        if task.get("cut"):
            with raw_connection() as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                    [SERVICE],
                )

    task: ClaimedTask[Any] = TaskRegistry().task(queue="pg", name="secrets", max_retries=3)(run)
    for n in range(3):
        enqueue_claimed(queue, f"secret:pg{n}", {"cut": n == 1}, window_seconds=60)
    stats = Worker("pg", task=task, backend=queue, wait=0.5, burst=True, using=service).run()
    assert stats.ok >= 2
    shown += [repr(connections[service]), repr(stats)]

    # The error paths ran and were logged (so the search below means something).
    assert {"queue.request_retry", "worker.database_error"} <= set(everything.events), (
        everything.events
    )
    texts = shown + everything.texts
    # Every shape of a secret, except those too short to mean anything.
    shapes = {shape for secret in hidden for shape in _representations(secret) if len(shape) >= 12}
    leaks = [(shape[:4], text[:200]) for text in texts for shape in shapes if shape in text]
    assert leaks == []
    record_figures(
        "secrets", texts_searched=len(texts), secrets=len(hidden), shapes=len(shapes), leaks=0
    )
