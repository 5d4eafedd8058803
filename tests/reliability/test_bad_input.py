"""Bad input to every public function, management command and setting:
wrong types, empty, huge, NUL-containing and non-UTF-8 (surrogate-escaped,
what a non-UTF-8 byte in ``argv`` or a file name becomes) values. Each gets
a clear error naming the culprit, and nothing is written: the claim and
message tables are compared before and after, with a live claim and an
expired one (which any stray claim of its key would replace) in place.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from astral_taskclaim.claims.bulk import claim_tasks, enqueue_claimed_many
from astral_taskclaim.claims.claim import claim_task, enqueue_claimed, hold_task, release_task
from astral_taskclaim.claims.maintenance import delete_expired, scrub
from astral_taskclaim.consumer.consume import consume_claimed
from astral_taskclaim.consumer.retry import retry_delay_seconds
from astral_taskclaim.queues.base import BaseQueue
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.tasks import ClaimedTask, RetryAfter, TaskRegistry
from astral_taskclaim.worker.loop import Worker
from tests.reliability.badinput import (
    HUGE,
    SURROGATE,
    TOKEN,
    WRONG_TYPES,
    batch,
    queue,
    rejected,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("populated")]

BAD_KEYS: list[tuple[Any, type[Exception], str]] = [
    ("", ValueError, "key must not be empty"),
    ("a\x00b", ValueError, "key must not contain NUL"),
    (HUGE, ValueError, "key is 100000 bytes of UTF-8, over the 1024-byte limit"),
    ("é" * 513, ValueError, "key is 1026 bytes"),
    (SURROGATE, ValueError, "key is not valid Unicode"),
    *[
        (value, TypeError, f"key must be a str, got {type(value).__name__}")
        for value in WRONG_TYPES
    ],
]
BAD_SECONDS: list[tuple[Any, type[Exception], str]] = [
    (-1, ValueError, "must be (from|more than) 0"),
    (math.nan, ValueError, "must be finite"),
    (math.inf, ValueError, "must be finite"),
    (10**12, ValueError, "must be from 0 to"),
    (True, TypeError, "must be an int or float, got bool"),
    ("300", TypeError, "must be an int or float, got str"),
    (None, TypeError, "must be an int or float, got NoneType"),
]
BAD_TOKENS: list[tuple[Any, type[Exception], str]] = [
    ("", ValueError, "token must be a hyphenated UUID"),
    ("not-a-uuid", ValueError, "token must be a hyphenated UUID"),
    (TOKEN + "\n", ValueError, "token must be a hyphenated UUID"),
    (TOKEN[:-1] + "\x00", ValueError, "token must be a hyphenated UUID"),
    (TOKEN[:-1] + "\udcff", ValueError, "token must be a hyphenated UUID"),
    (42, TypeError, "token must be a UUID string, got int"),
    (None, TypeError, "token must be a UUID string, got NoneType"),
]


@pytest.mark.parametrize(("key", "error", "match"), BAD_KEYS)
def test_a_bad_key(key: Any, error: type[Exception], match: str) -> None:
    rejected(lambda: claim_task(key, window_seconds=60), error, match)
    rejected(lambda: hold_task(key, TOKEN, delay_seconds=1, window_seconds=60), error, match)
    rejected(lambda: release_task(key, TOKEN), error, match)
    rejected(lambda: enqueue_claimed(queue(), key, {}, window_seconds=60), error, match)
    rejected(lambda: claim_tasks(["ok", key], window_seconds=60), error, "keys\\[1\\]")
    rejected(
        lambda: enqueue_claimed_many(queue(), [("ok", {}), (key, {})], window_seconds=60),
        error,
        "items\\[1\\] key",
    )


@pytest.mark.parametrize(("seconds", "error", "match"), BAD_SECONDS)
def test_bad_seconds(seconds: Any, error: type[Exception], match: str) -> None:
    rejected(lambda: claim_task("old", window_seconds=seconds), error, f"window_seconds {match}")
    for name in ("delay_seconds", "window_seconds"):
        kwargs = {"delay_seconds": 1, "window_seconds": 60, name: seconds}
        rejected(lambda kwargs=kwargs: hold_task("old", TOKEN, **kwargs), error, f"{name} {match}")  # type: ignore[misc]
    rejected(lambda: enqueue_claimed(queue(), "old", {}, window_seconds=seconds), error, match)
    rejected(lambda: claim_tasks(["old"], window_seconds=seconds), error, match)
    rejected(
        lambda: enqueue_claimed_many(queue(), [("old", {})], window_seconds=seconds), error, match
    )


@pytest.mark.parametrize(("token", "error", "match"), BAD_TOKENS)
def test_a_bad_token(token: Any, error: type[Exception], match: str) -> None:
    rejected(lambda: hold_task("k", token, delay_seconds=1, window_seconds=60), error, match)
    rejected(lambda: release_task("k", token), error, match)


@pytest.mark.parametrize(
    ("task", "error", "match"),
    [
        ({"x": math.nan}, ValueError, "task is not JSON-serialisable"),
        ({"x": b"bytes"}, TypeError, "task is not JSON-serialisable"),
        ({"x": object()}, TypeError, "task is not JSON-serialisable"),
        ({1j: "x"}, TypeError, "task is not JSON-serialisable"),
        # Caught before the claim: the expired claim of "old" stays as it was.
        ("x" * 200_000, ValueError, "over the 131072-byte limit"),
        ({"name": SURROGATE}, ValueError, "task"),
    ],
    ids=["nan", "bytes", "object", "complex-key", "huge", "surrogate"],
)
@pytest.mark.parametrize("backend", ["postgres", "memory"])
def test_a_bad_task(task: Any, error: type[Exception], match: str, backend: str) -> None:
    """On the PostgreSQL queue and on one outside the database (claims
    commit before the send there)."""

    def target() -> BaseQueue:
        return queue() if backend == "postgres" else MemoryQueue("bad-memory")

    rejected(lambda: enqueue_claimed(target(), "old", task, window_seconds=60), error, match)
    rejected(
        lambda: enqueue_claimed_many(target(), [("old", task)], window_seconds=60), error, match
    )


def test_a_task_nested_too_deep_to_encode_is_named() -> None:
    task: list[Any] = []
    for _ in range(200_000):  # deeper than Python's JSON encoder can go
        task = [task]
    rejected(lambda: enqueue_claimed(queue(), "old", task, window_seconds=60), ValueError, "task")
    rejected(
        lambda: enqueue_claimed_many(queue(), [("old", task)], window_seconds=60),
        ValueError,
        "task",
    )


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"max_retries": -1}, ValueError, "max_retries must be an int from 0"),
        ({"max_retries": 1.0}, ValueError, "max_retries must be an int from 0"),
        ({"max_retries": True}, ValueError, "max_retries must be an int from 0"),
        ({"max_retries": "3"}, ValueError, "max_retries must be an int from 0"),
        ({"parse": None}, TypeError, "parse must be callable"),
        ({"run": "print"}, TypeError, "run must be callable"),
        ({"retry_after_ms": 1000}, TypeError, "retry_after_ms must be callable"),
        ({"using": "nope"}, ValueError, "using must name an entry of DATABASES"),
    ],
)
def test_consume_claimed_rejects_bad_options_before_touching_a_message(
    options: dict[str, Any], error: type[Exception], match: str
) -> None:
    arguments = {"parse": lambda t: t, "run": lambda t: 1 / 0, "max_retries": 0, **options}
    delivered = batch()
    rejected(lambda: consume_claimed(delivered, **arguments), error, match)
    assert delivered.messages[0].settlement is None  # the failing run would have released "k"


class CallableObject:
    """A callable that is no function (no ``__qualname__``)."""

    def __call__(self, task: Any) -> None:
        """Runs nothing."""


def _task() -> ClaimedTask[Any]:
    return TaskRegistry().task(queue="bad", name="bad")(print)


def _claimed_task(run: Any) -> Any:
    return ClaimedTask(
        run,
        queue="q",
        max_retries=0,
        parse=None,
        retry_after_ms=None,
        name=None,
        window_seconds=None,
    )


# (id, call, error, match): everything else public, one row each.
OTHERS: list[tuple[str, Callable[[], object], type[Exception], str]] = [
    *[
        (
            f"using-{using!r}",
            lambda using=using: claim_task("old", window_seconds=1, using=using),
            ValueError,
            "using must name an entry of DATABASES",
        )
        for using in ("nope", 42, "")
    ],
    (
        "queue-without-send",
        lambda: enqueue_claimed(object(), "old", {}, window_seconds=1),  # type: ignore[arg-type]
        TypeError,
        "queue must have a send",
    ),
    ("keys-a-str", lambda: claim_tasks("old", window_seconds=1), TypeError, "keys must be a list"),
    ("keys-none", lambda: claim_tasks(None, window_seconds=1), TypeError, "keys must be a list"),  # type: ignore[arg-type]
    (
        "item-not-a-pair",
        lambda: enqueue_claimed_many(queue(), [("old",)], window_seconds=1),  # type: ignore[list-item]
        TypeError,
        r"items\[0\] must be a \(key, task\) pair",
    ),
    (
        "delete-expired-batch-0",
        lambda: delete_expired(batch_size=0),
        ValueError,
        "batch_size must be 1 or more",
    ),
    (
        "delete-expired-batch-str",
        lambda: delete_expired(batch_size="10"),  # type: ignore[arg-type]
        TypeError,  # type: ignore[arg-type]
        "batch_size must be an int",
    ),
    ("delete-expired-using", lambda: delete_expired(using="nope"), ValueError, "using"),
    ("scrub-using", lambda: scrub(using="nope"), ValueError, "using"),
    (
        "task-queue-empty",
        lambda: TaskRegistry().task(queue="")(print),
        ValueError,
        "queue must be a non-empty str",
    ),
    (
        "task-max-retries",
        lambda: TaskRegistry().task(max_retries=-1)(print),
        ValueError,
        "max_retries",
    ),
    (
        "task-window-nan",
        lambda: TaskRegistry().task(window_seconds=math.nan)(print),
        ValueError,
        "window_seconds",
    ),
    (
        "task-name-empty",
        lambda: TaskRegistry().task(name="")(print),
        ValueError,
        "name must be a non-empty str",
    ),
    (
        "task-name-nul",  # no run history could store it, no message could name it
        lambda: TaskRegistry().task(name="app.\x00job")(print),
        ValueError,
        "name must be a non-empty str without NUL",
    ),
    ("task-not-callable", lambda: _claimed_task(42), TypeError, "must decorate a function"),
    # A callable object is no function: a clear TypeError, not an AttributeError.
    ("task-callable-object", lambda: _claimed_task(CallableObject()), TypeError, "function|name"),
    (
        "retry-after-nan",
        lambda: RetryAfter(math.nan),
        ValueError,
        "retry_after_ms must be a finite number",
    ),
    ("retry-after-str", lambda: RetryAfter("5"), TypeError, "retry_after_ms must be a number"),  # type: ignore[arg-type]
    ("attempts-0", lambda: retry_delay_seconds(0), ValueError, "attempts must be 1 or more"),
    ("attempts-float", lambda: retry_delay_seconds(1.0), TypeError, "attempts must be an int"),  # type: ignore[arg-type]
    ("worker-batch-0", lambda: Worker("bad", task=_task(), batch_size=0), ValueError, "batch_size"),
    (
        "worker-batch-101",
        lambda: Worker("bad", task=_task(), batch_size=101),
        ValueError,
        "batch_size",
    ),
    (
        "worker-batch-str",
        lambda: Worker("bad", task=_task(), batch_size="5"),  # type: ignore[arg-type]
        TypeError,  # type: ignore[arg-type]
        "batch_size",
    ),
    ("worker-wait-negative", lambda: Worker("bad", task=_task(), wait=-1), ValueError, "wait"),
    ("worker-wait-nan", lambda: Worker("bad", task=_task(), wait=math.nan), ValueError, "wait"),
    (
        "worker-max-messages-0",
        lambda: Worker("bad", task=_task(), max_messages=0),
        ValueError,
        "max_messages",
    ),
    (
        "send-delay-negative",
        lambda: queue().send({}, delay_seconds=-1),
        ValueError,
        "delay_seconds",
    ),
    ("send-body-nan", lambda: queue().send({"x": math.nan}), TypeError, "not JSON-serialisable"),
    ("receive-0", lambda: queue().receive(max_messages=0), ValueError, "max_messages"),
    (
        "receive-wait-inf",
        lambda: queue().receive(max_messages=1, wait_seconds=math.inf),
        ValueError,
        "wait_seconds",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "match"), [row[1:] for row in OTHERS], ids=[row[0] for row in OTHERS]
)
def test_other_public_calls(call: Callable[[], object], error: type[Exception], match: str) -> None:
    rejected(call, error, match)
