"""Mutation fuzzing at volume: valid envelopes, mutated at random.

Hypothesis (``test_fuzz.py``) explores the shapes of bodies; this fuzzer
trades its search for speed, so the stress size reaches hundreds of
thousands of bodies. Each body starts as a valid envelope (a live key with
its real token, or a fresh one) and takes zero to four mutations: a field
dropped, renamed, doubled or given an odd value (NUL, huge or negative
numbers, NaN, a 5,000-character string, nested JSON, a bool), the claim's
case or spacing changed, the whole body wrapped or replaced. The oracle is
``test_fuzz``'s: ``consume_claimed`` must ack every body, run exactly the
valid ones, log the others as malformed, and leave the claim table as it
was; a worker on the PostgreSQL queue must drain them the same way.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from astral_taskclaim.consumer.consume import consume_claimed
from astral_taskclaim.queues.messages import MessageBatch, ReceivedMessage
from astral_taskclaim.queues.postgres import PostgresQueue
from tests.claimkit import insert_claim
from tests.reliability.support import (
    LIVE_KEYS,
    EventLog,
    drain,
    is_envelope,
    record_figures,
    sized,
    table_snapshot,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_tables")]

BODIES = sized(2_000, 100_000)
WORKER_BODIES = sized(300, 10_000)
BATCH = 100
FIELDS = ["key", "claim", "windowSeconds", "task"]
ODD = [
    None,
    True,
    False,
    0,
    -1,
    -0.0,
    0.5,
    1e300,
    -1e300,
    2**64,
    -(2**1100),
    float("nan"),
    float("inf"),
    "",
    "\x00",
    "x" * 5000,
    "ABCDEF00-0000-4000-8000-000000000000\n",
    " 6f1c2a4e-8d3b-4f7a-9c21-5e0b7d9a3f10",
    [],
    {},
    [1, [2, [3]]],
    {"a": {"b": {"c": None}}},
    "café ☕ \u2028",
]


def random_json(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.randrange(7 if depth < 3 else 4)
    if roll == 0:
        return rng.choice([None, True, False])
    if roll == 1:
        return rng.randint(-(2**63), 2**63)
    if roll == 2:
        return rng.uniform(-1e9, 1e9)
    if roll == 3:
        return "".join(chr(rng.randrange(32, 0x3000)) for _ in range(rng.randrange(12)))
    if roll in (4, 5):
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {f"f{n}": random_json(rng, depth + 1) for n in range(rng.randrange(4))}


def mutated(rng: random.Random, tokens: dict[str, str], *, storable: bool) -> Any:
    """A valid envelope with zero to four random mutations; ``storable``:
    no NaN or Infinity (a producer cannot encode them)."""
    key = rng.choice([*LIVE_KEYS, f"fresh:{rng.randrange(10**6)}"])
    claim = tokens.get(key) or str(uuid.UUID(int=rng.getrandbits(128), version=4))
    window = rng.choice([0, 0.5, 300, 86_400])
    body: Any = {"key": key, "claim": claim, "windowSeconds": window, "task": random_json(rng)}
    for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 4])):
        if not isinstance(body, dict):
            break
        field = rng.choice(FIELDS)
        roll = rng.randrange(8)
        if roll == 0:
            body.pop(field, None)
        elif roll in (1, 2):
            body[field] = rng.choice(ODD)
        elif roll == 3:
            body[field.upper() if rng.random() < 0.5 else field + "_"] = body.pop(field, None)
        elif roll == 4 and isinstance(body.get("claim"), str):
            body["claim"] = rng.choice([str.upper, str.lower, str.strip, "{{{}}}".format])(
                body["claim"]
            )
        elif roll == 5:
            body[field] = random_json(rng)
        elif roll == 6:
            body = rng.choice([[body], random_json(rng), str(body)])
        else:
            body["extra"] = rng.choice(ODD)
    if storable and not is_storable(body):
        return mutated(rng, tokens, storable=storable)
    return body


def is_storable(value: Any) -> bool:
    if isinstance(value, float):
        return value == value and abs(value) != float("inf")
    if isinstance(value, list):
        return all(is_storable(v) for v in value)
    if isinstance(value, dict):
        return all(is_storable(v) for v in value.values())
    return True


@pytest.fixture
def live_tokens() -> dict[str, str]:
    return {key: insert_claim(key, seconds=600) for key in LIVE_KEYS}


@pytest.fixture
def fuzz_queue() -> Iterator[PostgresQueue]:
    queue = PostgresQueue("fuzz", options={"queue_name": f"fuzz-{uuid.uuid4().hex}"})
    yield queue
    queue.close()


def test_consume_claimed_survives_mutated_envelopes(
    live_tokens: dict[str, str], event_log: EventLog
) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    before = table_snapshot()
    valid_total = 0
    for _ in range(0, BODIES, BATCH):
        bodies = [mutated(rng, live_tokens, storable=False) for _ in range(BATCH)]
        messages = [ReceivedMessage(body=b, attempts=1, receipt=None) for b in bodies]
        ran: list[Any] = []
        summary = consume_claimed(
            MessageBatch("fuzz", messages),
            parse=lambda t: ("parsed", t),
            run=ran.append,
            max_retries=3,
        )
        valid = [body for body in bodies if is_envelope(body)]
        valid_total += len(valid)
        assert [m.settlement for m in messages] == ["ack"] * BATCH, f"seed {seed}"
        assert ran == [("parsed", body.get("task")) for body in valid], f"seed {seed}"
        assert summary.malformed == BATCH - len(valid), f"seed {seed}"
        assert table_snapshot() == before, f"seed {seed}"
        event_log.records.clear()  # kept small: a stress run logs 100,000s
    assert 0 < valid_total < BODIES  # both kinds were made
    record_figures("fuzz_mutations", bodies=BODIES, valid=valid_total, seed=seed)


def test_a_worker_survives_mutated_envelopes(
    fuzz_queue: PostgresQueue, live_tokens: dict[str, str], event_log: EventLog
) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    before = table_snapshot()
    for _ in range(0, WORKER_BODIES, BATCH):
        bodies = [mutated(rng, live_tokens, storable=True) for _ in range(BATCH)]
        fuzz_queue.send_many(bodies)
        ran: list[Any] = []
        stats = drain(fuzz_queue, ran.append)
        valid = [body for body in bodies if is_envelope(body)]
        assert stats.received == BATCH, f"seed {seed}"
        assert (stats.ok, stats.malformed) == (len(valid), BATCH - len(valid)), f"seed {seed}"
        assert ran == [("parsed", body.get("task")) for body in valid], f"seed {seed}"
        assert table_snapshot() == before, f"seed {seed}"  # drained, no claim touched
        event_log.records.clear()
    record_figures("fuzz_mutations_worker", bodies=WORKER_BODIES, seed=seed)
