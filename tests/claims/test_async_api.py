"""The async claim functions against the real claim table, each mirroring
its sync namesake's semantics, run on event loops of their own."""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured, SynchronousOnlyOperation
from django.db import ProgrammingError, connection, transaction

from astral_taskclaim import (
    aclaim_task,
    aenqueue_claimed,
    ahold_task,
    arelease_task,
    claim_task,
    enqueue_claimed,
)
from astral_taskclaim.claims import async_api as aio
from astral_taskclaim.core.envelope import message_body
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.queues.postgres import PostgresQueue
from tests.aiokit import run
from tests.claimkit import (
    RecordingQueue,
    claims,
    insert_claim,
    restricted_role,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

QUEUE = "async-enqueue"


@pytest.fixture
def queue() -> Iterator[PostgresQueue]:
    yield PostgresQueue(QUEUE)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.message WHERE queue = %s", [QUEUE])


def messages() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT body FROM taskclaim.message WHERE queue = %s ORDER BY id", [QUEUE])
        return [body for (body,) in cursor.fetchall()]


# aclaim_task


def test_aclaim_returns_a_fresh_token_then_none_inside_the_window() -> None:
    async def twice() -> tuple[str | None, str | None]:
        first = await aclaim_task("project:42", window_seconds=3600)
        return first, await aclaim_task("project:42", window_seconds=9999)

    first, second = run(twice())
    assert first is not None
    assert uuid.UUID(first).version == 4
    assert second is None
    stored, left = claims()["project:42"]
    assert stored == first
    assert 3500 < left <= 3600  # the second claim did not push the expiry out


def test_aclaim_replaces_an_expired_claim() -> None:
    old = insert_claim("k", seconds=-1)
    token = run(aclaim_task("k", window_seconds=60))
    assert token not in (None, old)
    assert claims()["k"][0] == token


def test_concurrent_aclaims_of_one_key_on_one_loop_yield_exactly_one_token() -> None:
    async def race() -> list[str | None]:
        return await asyncio.gather(*(aclaim_task("hot", window_seconds=600) for _ in range(20)))

    results = run(race())
    tokens = [token for token in results if token is not None]
    assert len(tokens) == 1
    assert claims()["hot"][0] == tokens[0]


def test_aclaim_works_where_the_sync_call_raises_synchronous_only() -> None:
    async def both() -> str | None:
        with pytest.raises(SynchronousOnlyOperation, match=r"aclaim_task\(\) for claim_task"):
            claim_task("sync", window_seconds=60)
        return await aclaim_task("async", window_seconds=60)

    assert run(both()) is not None
    assert set(claims()) == {"async"}


def test_sync_enqueues_in_async_code_name_their_async_twins() -> None:
    # An async view calling the sync API: the error says what to await.
    async def view() -> None:
        with pytest.raises(SynchronousOnlyOperation) as raised:
            enqueue_claimed(PostgresQueue("default"), "sync", 1, window_seconds=60)
        assert "aenqueue_claimed() for enqueue_claimed()" in str(raised.value)
        assert "aenqueue() for enqueue()" in str(raised.value)

    run(view())
    assert claims() == {}


# ahold_task and arelease_task


def test_ahold_extends_the_holders_claim_and_reclaims_a_freed_key() -> None:
    token = insert_claim("held", seconds=10)
    freed = str(uuid.uuid4())

    async def hold() -> None:
        await ahold_task("held", token, delay_seconds=120, window_seconds=60)
        await ahold_task("freed", freed, delay_seconds=30, window_seconds=30)

    run(hold())
    stored = claims()
    assert stored["held"][0] == token
    assert 170 < stored["held"][1] <= 180
    assert stored["freed"][0] == freed
    assert 50 < stored["freed"][1] <= 60


def test_ahold_leaves_a_later_claim_alone() -> None:
    later = insert_claim("k", seconds=5)
    run(ahold_task("k", str(uuid.uuid4()), delay_seconds=3600, window_seconds=3600))
    stored, left = claims()["k"]
    assert stored == later
    assert left <= 5


def test_arelease_frees_the_key_for_its_token_only() -> None:
    token = insert_claim("k", seconds=600)
    run(arelease_task("k", str(uuid.uuid4())))
    assert claims()["k"][0] == token
    run(arelease_task("k", uuid.UUID(token)))  # type: ignore[arg-type]
    assert claims() == {}


BAD_CALLS: list[tuple[Callable[[], Awaitable[Any]], type[Exception], str]] = [
    (lambda: aclaim_task(b"k", window_seconds=60), TypeError, "key must be a str"),  # type: ignore[arg-type]
    (lambda: aclaim_task("k", window_seconds=-1), ValueError, "window_seconds"),
    (lambda: ahold_task("k", "nope", delay_seconds=1, window_seconds=1), ValueError, "token"),
    (
        lambda: ahold_task("k", str(uuid.uuid4()), delay_seconds=-1, window_seconds=1),
        ValueError,
        "delay_seconds",
    ),
    (lambda: arelease_task("", str(uuid.uuid4())), ValueError, "key must not be empty"),
    (lambda: aclaim_task("k", window_seconds=60, using="nowhere"), ValueError, "using must name"),
]


@pytest.mark.parametrize(("call", "error", "message"), BAD_CALLS)
def test_bad_arguments_raise_naming_the_culprit_before_any_write(
    call: Callable[[], Awaitable[Any]], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        run(call())
    assert claims() == {}


def test_inside_atomic_the_async_functions_refuse_before_writing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Only async code allowed to use Django's blocking connection can be
    # inside atomic() on the event loop; it must not get a commit behind it.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

    async def inside() -> None:
        try:
            with transaction.atomic():
                await aclaim_task("k", window_seconds=60)
        finally:
            connection.close()  # this loop's own Django connection

    with pytest.raises(transaction.TransactionManagementError, match=r"call the sync claim_task"):
        run(inside())
    assert claims() == {}


def test_the_alias_assume_role_applies_and_its_errors_are_djangos(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connection.ensure_connection()  # made without the role, so it keeps working
    with restricted_role("SELECT") as role, monkeypatch.context() as patch:
        patch.setitem(connection.settings_dict["OPTIONS"], "assume_role", role)
        with pytest.raises(ProgrammingError, match="permission denied for table claim"):
            run(aclaim_task("k", window_seconds=60))
    assert claims() == {}


# aenqueue_claimed


def test_aenqueue_on_the_postgres_queue_writes_claim_and_message_together(
    queue: PostgresQueue,
) -> None:
    task = {"name": 'Zoë "quoted"', "n": [1, 2.5, None]}

    async def twice() -> tuple[str | None, str | None]:
        first = await aenqueue_claimed(queue, "room:ü", task, window_seconds=1.5)
        return first, await aenqueue_claimed(queue, "room:ü", task, window_seconds=1.5)

    token, again = run(twice())
    assert token is not None
    assert again is None
    assert claims()["room:ü"][0] == token
    sent = message_body("room:ü", token, 1.5, task)
    assert messages() == [queue.encode(sent).decode("utf-8")]


def test_aenqueue_refuses_a_body_too_big_before_claiming(queue: PostgresQueue) -> None:
    with pytest.raises(ValueError, match="over the"):
        run(aenqueue_claimed(queue, "k", "x" * queue.max_body_bytes, window_seconds=60))
    assert claims() == {}
    assert messages() == []


def test_aenqueue_refuses_a_misconfigured_queue_before_claiming() -> None:
    broken = PostgresQueue(QUEUE, options={"visibility_timeout": -1})
    with pytest.raises(ImproperlyConfigured, match="misconfigured"):
        run(aenqueue_claimed(broken, "k", {}, window_seconds=60))
    assert claims() == {}


class ThreadRecordingQueue(RecordingQueue):
    """Records which thread each send ran on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []

    def send(self, body: Any) -> None:
        self.threads.append(threading.get_ident())
        super().send(body)


def test_aenqueue_sends_to_another_queue_from_a_worker_thread() -> None:
    queue = ThreadRecordingQueue()

    async def enqueue() -> tuple[str | None, str | None, int]:
        first = await aenqueue_claimed(queue, "k", {"n": 1}, window_seconds=60)
        held = await aenqueue_claimed(queue, "k", {"n": 2}, window_seconds=60)
        return first, held, threading.get_ident()

    token, held, loop_thread = run(enqueue())
    assert token is not None
    assert held is None
    assert queue.sent == [message_body("k", token, 60, {"n": 1})]
    assert claims()["k"][0] == token
    assert len(queue.threads) == 1
    assert queue.threads[0] != loop_thread


def test_aenqueue_releases_the_claim_when_the_send_fails() -> None:
    queue = RecordingQueue(fail=ConnectionError("queue down"))
    with pytest.raises(ConnectionError, match="queue down"):
        run(aenqueue_claimed(queue, "k", {}, window_seconds=60))
    assert claims() == {}


def test_a_key_with_a_newline_is_escaped_when_the_release_after_a_failed_send_fails(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def release_fails(*args: object, **kwargs: object) -> None:
        raise ProgrammingError("permission denied for table claim")

    monkeypatch.setattr(aio, "arelease_task", release_fails)
    caplog.set_level(logging.ERROR, logger="astral_taskclaim")
    queue = RecordingQueue(fail=ConnectionError("queue down"))
    with pytest.raises(ConnectionError, match="queue down"):
        run(aenqueue_claimed(queue, "a\nERROR forged", {}, window_seconds=60))
    [record] = [r for r in caplog.records if getattr(r, "event", None)]
    assert record.event == "queue.claim_release_failed"  # type: ignore[attr-defined]
    assert record.getMessage().startswith("task a\\nERROR forged: send failed")
    assert record.key == "a\nERROR forged"  # type: ignore[attr-defined]
    assert "a\nERROR forged" in claims()  # claimed for the window


def test_aenqueue_on_the_memory_queue_sends_one_message_per_key() -> None:
    queue = MemoryQueue(f"async-memory-{uuid.uuid4().hex}")

    async def burst() -> list[str | None]:
        calls = (aenqueue_claimed(queue, f"k{i % 3}", i, window_seconds=60) for i in range(12))
        return await asyncio.gather(*calls)

    results = run(burst())
    assert sum(token is not None for token in results) == 3
    batch = queue.receive(max_messages=100)
    assert sorted(message.body["key"] for message in batch.messages) == ["k0", "k1", "k2"]


class GatedQueue(RecordingQueue):
    """``send`` signals ``entered``, then waits for ``gate`` before recording."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.done = threading.Event()

    def send(self, body: Any) -> None:
        self.entered.set()
        assert self.gate.wait(30)
        super().send(body)
        self.done.set()


def test_a_caller_cancelled_between_claim_and_send_still_gets_the_task_sent() -> None:
    queue = GatedQueue()

    async def cancel_midway() -> str:
        call = asyncio.ensure_future(aenqueue_claimed(queue, "k", {"n": 1}, window_seconds=60))
        assert await asyncio.to_thread(queue.entered.wait, 30)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        queue.gate.set()
        assert await asyncio.to_thread(queue.done.wait, 30)
        return claims_token()

    def claims_token() -> str:
        return queue.sent[0]["claim"]  # type: ignore[no-any-return]

    token = run(cancel_midway())
    assert queue.sent == [message_body("k", token, 60, {"n": 1})]
    assert claims()["k"][0] == token
