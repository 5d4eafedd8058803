"""consume_claimed: settling each message as the TypeScript package does, with real claims."""

from __future__ import annotations

import json
import logging
import math
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction
from django.db.transaction import TransactionManagementError
from django.test import override_settings

from astral_taskclaim import claim_task, consume_claimed
from astral_taskclaim.consumer.consume import Consumer
from astral_taskclaim.consumer.retry import RetryAfter
from astral_taskclaim.consumer.summary import ConsumeSummary, TaskOptions
from astral_taskclaim.queues.messages import MessageBatch, ReceivedMessage
from tests.claimkit import (
    claims,
    django_pid,
    insert_claim,
    restricted_role,
    set_role,
    terminate,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


class TaskError(Exception):
    def __init__(self, retry_after_ms: object = None) -> None:
        super().__init__("task failed")
        self.retry_after_ms = retry_after_ms


def message(body: Any, *, attempts: int = 1) -> ReceivedMessage:
    return ReceivedMessage(body=body, attempts=attempts, receipt=None)


def claimed(key: str = "project:42", *, window: float = 300, task: Any = None) -> dict[str, Any]:
    """An envelope under a real, fresh claim of ``key``."""
    token = claim_task(key, window_seconds=window)
    assert token is not None
    return {"key": key, "claim": token, "windowSeconds": window, "task": task or {"id": 42}}


def succeed(task: Any) -> None:
    pass


def fail(task: Any) -> None:
    raise TaskError()


def consume(
    *messages: ReceivedMessage,
    run: Callable[[Any], object] = succeed,
    parse: Callable[[Any], Any] = lambda task: task,
    max_retries: int = 3,
    **options: Any,
) -> Any:
    batch = MessageBatch(queue="refresh", messages=list(messages))
    return consume_claimed(batch, parse=parse, run=run, max_retries=max_retries, **options)


def events(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "astral_taskclaim.consumer.consume"]


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="astral_taskclaim")
    return caplog


def test_a_typescript_envelope_runs_and_keeps_its_claim(logs: pytest.LogCaptureFixture) -> None:
    token = claim_task("project:42", window_seconds=300)
    assert token is not None
    before = claims()["project:42"]
    # The body exactly as the TypeScript producer's JSON.stringify writes it.
    text = f'{{"key":"project:42","claim":"{token}","windowSeconds":300,"task":{{"id":42}}}}'
    ran: list[Any] = []
    delivered = message(json.loads(text))
    summary = consume(delivered, run=ran.append)
    assert ran == [{"id": 42}]
    assert delivered.settlement == "ack"
    after = claims()["project:42"]
    assert after[0] == token
    assert before[1] - 5 < after[1] <= before[1]  # kept to the end of its window
    assert (summary.ok, summary.messages) == (1, 1)
    assert events(logs) == []
    # A trigger inside the window coalesces.
    assert claim_task("project:42", window_seconds=300) is None


def test_an_upper_case_claim_is_accepted_and_written() -> None:
    body = claimed()
    body["claim"] = body["claim"].upper()
    delivered = message(body, attempts=4)
    consume(delivered, run=fail, max_retries=3)
    assert delivered.settlement == "ack"
    assert claims() == {}  # released by the same token, in either case


MALFORMED = [
    None,
    "a string",
    42,
    ["project:42"],
    {},
    {"claim": str(uuid.uuid4()), "windowSeconds": 1},
    {"key": 42, "claim": str(uuid.uuid4()), "windowSeconds": 1},
    {"key": "k", "windowSeconds": 1},
    {"key": "k", "claim": "not-a-uuid", "windowSeconds": 1},
    {"key": "k", "claim": str(uuid.uuid4()) + "\n", "windowSeconds": 1},
    {"key": "k", "claim": str(uuid.uuid4()).replace("-", ""), "windowSeconds": 1},
    {"key": "k", "claim": str(uuid.uuid4())},
    {"key": "k", "claim": str(uuid.uuid4()), "windowSeconds": "300"},
    {"key": "k", "claim": str(uuid.uuid4()), "windowSeconds": True},
    {"key": "k", "claim": str(uuid.uuid4()), "windowSeconds": None},
    {"key": "k", "claim": str(uuid.uuid4()), "windowSeconds": -1},
    {"key": "k", "claim": str(uuid.uuid4()), "windowSeconds": math.nan},
    {"key": "k", "claim": str(uuid.uuid4()), "windowSeconds": math.inf},
    {"key": "k", "claim": str(uuid.uuid4()), "windowSeconds": 10**400},
    {"key": "k", "windowSeconds": 1, "claim": {"id": 1}},
    # A key or window no claim function accepts: its claim was never written.
    {"key": "", "claim": str(uuid.uuid4()), "windowSeconds": 1},
    {"key": "k\x00", "claim": str(uuid.uuid4()), "windowSeconds": 1},
    {"key": "é" * 513, "claim": str(uuid.uuid4()), "windowSeconds": 1},
    {"key": "caf\udce9", "claim": str(uuid.uuid4()), "windowSeconds": 1},
    {"key": "k", "claim": str(uuid.uuid4()), "windowSeconds": 1e300},
    {"key": "k", "claim": str(uuid.uuid4()), "windowSeconds": 10**12},
]


@pytest.mark.parametrize("body", MALFORMED)
def test_a_malformed_body_is_logged_and_acked_and_no_claim_is_touched(
    body: Any, logs: pytest.LogCaptureFixture
) -> None:
    token = insert_claim("k", seconds=600)
    before = claims()
    called: list[Any] = []
    delivered = message(body, attempts=99)
    summary = consume(delivered, run=called.append, parse=called.append, max_retries=0)
    assert delivered.settlement == "ack"
    assert called == []
    assert claims()["k"][0] == token
    assert set(claims()) == set(before)
    [record] = events(logs)
    assert (record.levelno, record.event, record.queue) == (  # type: ignore[attr-defined]
        logging.WARNING,
        "queue.message_malformed",
        "refresh",
    )
    assert summary.malformed == 1


@pytest.mark.parametrize("window", [0, 0.5, 300, 1e9, 10**11])
def test_any_finite_window_from_zero_is_accepted(window: float) -> None:
    body = {"key": "k", "claim": str(uuid.uuid4()), "windowSeconds": window, "task": 1}
    ran: list[Any] = []
    consume(message(body), run=ran.append)
    assert ran == [1]


def test_a_missing_task_is_parsed_as_none() -> None:
    seen: list[Any] = []
    body = {"key": "k", "claim": str(uuid.uuid4()), "windowSeconds": 1}
    consume(message(body), parse=lambda task: seen.append(task) or "ok")
    assert seen == [None]


@pytest.mark.parametrize("raises", [False, True])
def test_an_unparseable_task_releases_its_claim_and_acks(
    raises: bool, logs: pytest.LogCaptureFixture
) -> None:
    def parse(task: Any) -> Any:
        if raises:
            raise ValueError("bad task")
        return None

    ran: list[Any] = []
    delivered = message(claimed())
    summary = consume(delivered, parse=parse, run=ran.append)
    assert ran == []
    assert delivered.settlement == "ack"
    assert claims() == {}
    [record] = events(logs)
    assert record.levelno == logging.WARNING
    assert record.event == "queue.task_unparseable"  # type: ignore[attr-defined]
    assert (record.queue, record.key) == ("refresh", "project:42")  # type: ignore[attr-defined]
    assert (record.exc_info is not None) is raises
    assert summary.unparseable == 1


@pytest.mark.parametrize(("attempts", "delay"), [(1, 30), (2, 60), (3, 120)])
def test_a_failure_within_max_retries_retries_and_holds_the_claim(
    attempts: int, delay: int, logs: pytest.LogCaptureFixture
) -> None:
    body = claimed(window=100)
    delivered = message(body, attempts=attempts)
    summary = consume(delivered, run=fail, max_retries=3)
    assert delivered.settlement == "retry"
    assert delivered.delay_seconds == delay
    token, left = claims()["project:42"]
    assert token == body["claim"]
    assert delay + 100 - 5 < left <= delay + 100
    assert summary.retried == 1
    assert summary.retry_delays == [delay]
    [record] = events(logs)
    assert record.levelno == logging.INFO
    assert record.event == "queue.task_retrying"  # type: ignore[attr-defined]
    assert record.attempts == attempts  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("asked", "delay"),
    [
        (120_000, 120),
        (120_001, 121),
        (1_000, 30),
        (10**12, 43_200),
        (math.nan, 30),
        (-5_000, 30),
        (True, 30),
        ("120000", 30),
        (None, 30),
    ],
)
def test_retry_after_ms_can_lengthen_the_delay(asked: object, delay: int) -> None:
    delivered = message(claimed())
    consume(
        delivered,
        run=lambda task: (_ for _ in ()).throw(TaskError(asked)),
        retry_after_ms=lambda error: error.retry_after_ms,
    )
    assert delivered.delay_seconds == delay


def test_a_planned_retry_logs_no_traceback(logs: pytest.LogCaptureFixture) -> None:
    def busy(task: Any) -> None:
        raise RetryAfter(120_000)

    consume(message(claimed("planned")), run=busy)
    consume(message(claimed("broken")), run=fail)

    retrying = [r for r in events(logs) if getattr(r, "event", "") == "queue.task_retrying"]
    assert [(r.key, bool(r.exc_info)) for r in retrying] == [  # type: ignore[attr-defined]
        ("planned", False),
        ("broken", True),
    ]


def test_a_raising_retry_after_ms_counts_as_none() -> None:
    def broken(error: BaseException) -> float:
        raise RuntimeError("no header")

    delivered = message(claimed(), attempts=2)
    consume(delivered, run=fail, retry_after_ms=broken)
    assert (delivered.settlement, delivered.delay_seconds) == ("retry", 60)


def test_a_hold_reclaims_a_freed_key_and_leaves_a_later_claim() -> None:
    freed = claimed("freed", window=10)
    taken = claimed("taken", window=10)
    with_connection_cursor("DELETE FROM taskclaim.claim")
    later = insert_claim("taken", seconds=5)
    consume(message(freed), message(taken), run=fail)
    stored = claims()
    assert stored["freed"][0] == freed["claim"]
    assert 30 + 10 - 5 < stored["freed"][1] <= 40
    assert stored["taken"][0] == later
    assert stored["taken"][1] <= 5


def with_connection_cursor(statement: str) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement)


def test_the_last_failure_logs_releases_and_acks(logs: pytest.LogCaptureFixture) -> None:
    delivered = message(claimed(), attempts=4)
    summary = consume(delivered, run=fail, max_retries=3)
    assert delivered.settlement == "ack"
    assert claims() == {}
    [record] = events(logs)
    assert record.levelno == logging.ERROR
    assert record.event == "queue.task_failed"  # type: ignore[attr-defined]
    assert (record.queue, record.key, record.attempts) == ("refresh", "project:42", 4)  # type: ignore[attr-defined]
    assert isinstance(record.exc_info[1], TaskError)  # type: ignore[index]
    assert "failed after 4 attempts" in record.getMessage()
    assert summary.failed == 1


def test_max_retries_zero_gives_up_on_the_first_failure() -> None:
    delivered = message(claimed(), attempts=1)
    consume(delivered, run=fail, max_retries=0)
    assert delivered.settlement == "ack"
    assert claims() == {}


def test_a_final_release_leaves_a_later_claim() -> None:
    body = claimed()
    with_connection_cursor("DELETE FROM taskclaim.claim")
    later = insert_claim("project:42", seconds=600)
    consume(message(body, attempts=9), run=fail)
    assert claims()["project:42"][0] == later


@pytest.mark.parametrize("max_retries", [-1, True, False, 1.0, "3", None, math.inf])
def test_a_bad_max_retries_raises_before_any_message_is_touched(max_retries: Any) -> None:
    delivered = message(claimed())
    with pytest.raises(ValueError, match="max_retries must be an int from 0"):
        consume(delivered, run=fail, max_retries=max_retries)
    assert delivered.settlement is None
    assert "project:42" in claims()


def test_inside_atomic_it_raises_before_any_message_is_touched() -> None:
    delivered = message(claimed(), attempts=9)
    with pytest.raises(TransactionManagementError), transaction.atomic():
        consume(delivered, run=fail)
    assert delivered.settlement is None
    assert "project:42" in claims()


@override_settings(TASKCLAIM_DELAY_SCALE=0.01)
def test_the_delay_scale_shortens_the_retry_and_the_hold() -> None:
    delivered = message(claimed(window=100), attempts=2)
    summary = consume(delivered, run=fail)
    assert delivered.delay_seconds == 0.6
    assert summary.retry_delays == [0.6]
    assert 95 < claims()["project:42"][1] <= 100.6


def test_a_failed_hold_is_logged_and_the_message_still_retries(
    logs: pytest.LogCaptureFixture,
) -> None:
    failing, succeeding = claimed("a"), claimed("b")
    with restricted_role("SELECT", "DELETE") as role:

        def run(task: Any) -> None:
            if task == "a":
                set_role(role)
                raise TaskError()

        first, second = message({**failing, "task": "a"}), message({**succeeding, "task": "b"})
        summary = consume(first, second, run=run)
    assert (first.settlement, first.delay_seconds) == ("retry", 30)
    assert second.settlement == "ack"  # the batch went on
    hold = [r for r in events(logs) if r.event == "queue.claim_hold_failed"]  # type: ignore[attr-defined]
    assert len(hold) == 1
    assert (hold[0].levelno, hold[0].queue, hold[0].key) == (logging.ERROR, "refresh", "a")  # type: ignore[attr-defined]
    assert "permission denied" in str(hold[0].exc_info[1])  # type: ignore[index]
    assert summary.claim_write_failures == 1
    assert summary.retried == 1
    assert summary.ok == 1


def test_a_failed_release_is_logged_and_the_message_still_acks(
    logs: pytest.LogCaptureFixture,
) -> None:
    body = claimed()
    with restricted_role("SELECT", "INSERT", "UPDATE") as role:

        def parse(task: Any) -> None:
            set_role(role)
            return None

        delivered = message(body)
        consume(delivered, parse=parse)
    assert delivered.settlement == "ack"
    assert claims()["project:42"][0] == body["claim"]  # claimed for the window
    [record] = [r for r in events(logs) if r.levelno == logging.ERROR]
    assert record.event == "queue.claim_release_failed"  # type: ignore[attr-defined]
    assert (record.queue, record.key) == ("refresh", "project:42")  # type: ignore[attr-defined]
    assert record.exc_info is not None


def test_a_terminated_connection_fails_the_hold_then_the_batch_reconnects(
    logs: pytest.LogCaptureFixture,
) -> None:
    first, second = claimed("a"), claimed("b")

    def run(task: Any) -> None:
        if task == "a":
            terminate(django_pid())
        raise TaskError()

    held, final = message({**first, "task": "a"}), message({**second, "task": "b"}, attempts=4)
    summary = consume(held, final, run=run)
    assert held.settlement == "retry"
    assert final.settlement == "ack"
    assert set(claims()) == {"a"}  # b's release ran on a new connection
    failures = [r.event for r in events(logs) if r.levelno == logging.ERROR]  # type: ignore[attr-defined]
    assert failures == ["queue.claim_hold_failed", "queue.task_failed"]
    assert summary.claim_write_failures == 1


def test_an_async_run_is_awaited() -> None:
    done: list[Any] = []

    async def run(task: Any) -> None:
        done.append(task)

    async def run_failing(task: Any) -> None:
        raise TaskError()

    ok, failed = message(claimed("a", task=1)), message(claimed("b", task=2))
    consume(ok, run=run)
    consume(failed, run=run_failing)
    assert done == [1]
    assert (ok.settlement, failed.settlement) == ("ack", "retry")


def test_keyboard_interrupt_is_not_a_task_failure() -> None:
    def run(task: Any) -> None:
        raise KeyboardInterrupt

    delivered = message(claimed())
    with pytest.raises(KeyboardInterrupt):
        consume(delivered, run=run)
    assert delivered.settlement is None


def test_the_summary_counts_every_outcome() -> None:
    def run(task: Any) -> None:
        if task == "fail":
            raise TaskError()

    batch = [
        message(claimed("ok", task="ok")),
        message(claimed("retry", task="fail"), attempts=2),
        message(claimed("final", task="fail"), attempts=5),
        message({"not": "an envelope"}),
        message(claimed("bad", task="bad")),
    ]
    summary = consume(*batch, run=run, parse=lambda task: None if task == "bad" else task)
    assert (summary.ok, summary.retried, summary.failed) == (1, 1, 1)
    assert (summary.malformed, summary.unparseable, summary.messages) == (1, 1, 5)
    assert summary.retry_delays == [60]
    assert str(summary) == (
        "refresh: 5 messages, 1 ok, 1 retried, 1 failed, 1 malformed, 1 unparseable"
    )


@pytest.mark.django_db
def test_inside_a_test_case_transaction_it_runs() -> None:
    delivered = message(claimed(), attempts=9)
    consume(delivered, run=fail)
    assert delivered.settlement == "ack"
    assert claims() == {}


def test_an_invalid_key_under_a_real_token_is_malformed_and_never_claimed_as_held(
    logs: pytest.LogCaptureFixture,
) -> None:
    # The claim of an empty key cannot exist; a failing task must not log a
    # hold or a release of it.
    body = {"key": "", "claim": str(uuid.uuid4()), "windowSeconds": 300, "task": 1}
    delivered = message(body, attempts=1)
    summary = consume(delivered, run=fail)
    assert delivered.settlement == "ack"
    assert (summary.malformed, summary.failed, summary.retried) == (1, 0, 0)
    assert [record.event for record in events(logs)] == ["queue.message_malformed"]  # type: ignore[attr-defined]
    assert claims() == {}


def test_a_key_with_a_newline_cannot_forge_a_log_line(logs: pytest.LogCaptureFixture) -> None:
    key = "k\nERROR astral_taskclaim.consumer.consume: forged\x1b[2J"
    consume(message(claimed(key), attempts=4), run=fail)
    [record] = events(logs)
    assert record.event == "queue.task_failed"  # type: ignore[attr-defined]
    text = record.getMessage()
    assert (
        text == "refresh task k\\nERROR astral_taskclaim.consumer.consume: forged\\x1b[2J"
        " failed after 4 attempts"
    )
    assert record.key == key  # type: ignore[attr-defined]  (structured: left as it is)


@override_settings(TASKCLAIM_DELAY_SCALE=0.5)
def test_consume_one_settles_one_message_and_returns_its_outcome() -> None:
    def run(task: Any) -> None:
        if task == "fail":
            raise TaskError()

    options = TaskOptions(lambda task: None if task == "bad" else task, run, 1)
    consumer = Consumer("refresh", default=options).consumer()
    summary = ConsumeSummary("refresh")
    delivered = [
        message(claimed("ok", task="ok")),
        message(claimed("retry", task="fail")),
        message(claimed("final", task="fail"), attempts=2),
        message({"not": "an envelope"}),
        message(claimed("bad", task="bad")),
    ]
    outcomes = [consumer.consume_one(one, summary) for one in delivered]
    assert outcomes == ["ok", "retried", "failed", "malformed", "unparseable"]
    assert [one.settlement for one in delivered] == ["ack", "retry", "ack", "ack", "ack"]
    assert (summary.ok, summary.retried, summary.failed, summary.messages) == (1, 1, 1, 5)
    assert summary.retry_delays == [15]  # 30 s at scale 0.5, read once by consumer()
    assert set(claims()) == {"ok", "retry"}
