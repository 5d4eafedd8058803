"""The message body: its JSON, its fast writer, and reading one back."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from hypothesis import given
from hypothesis import strategies as st

from astral_taskclaim.claims.bulk import enqueue_claimed_many
from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.core.envelope import (
    PLACEHOLDER_TOKEN,
    NotJSONError,
    body_writer,
    encode_json,
    is_token,
    message_body,
    parse_body,
)
from astral_taskclaim.core.validation import MAX_SECONDS, validate_key, validate_seconds
from astral_taskclaim.queues import queues
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.tasks import ClaimedTask
from tests.claimkit import RecordingQueue, claims

NON_STRING_KEYS = [
    ({True: 1, "true": 2}, r"task has the key True \(bool\)"),
    ({"a": [0, {1: "x"}]}, r"task\['a'\]\[1\] has the key 1 \(int\)"),
    ([{"b": ({None: 1},)}], r"task\[0\]\['b'\]\[0\] has the key None \(NoneType\)"),
    ({"x": {1.5: 0}}, r"task\['x'\] has the key 1.5 \(float\)"),
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("empty_claims")
@pytest.mark.parametrize(("task", "match"), NON_STRING_KEYS)
def test_a_task_with_a_non_string_key_is_refused_naming_the_path(task: Any, match: str) -> None:
    queue = RecordingQueue()
    with pytest.raises(TypeError, match=match):
        enqueue_claimed(queue, "k", task, window_seconds=60)
    with pytest.raises(TypeError, match=match.replace("task", r"items\[1\] task", 1)):
        enqueue_claimed_many(MemoryQueue("m"), [("a", 1), ("b", task)], window_seconds=60)
    assert queue.sent == []
    assert claims() == {}


NOT_JSON = [
    ({"when": datetime(2030, 1, 1, tzinfo=UTC)}, "task['when']: Object of type datetime is not"),
    ({"items": [1, 2, {3}]}, "task['items'][2]: Object of type set is not JSON serializable"),
    ([{"a": 1}, {"b": [math.inf]}], "task[1]['b'][0] is inf (JSON has no NaN or infinity)"),
    (
        {"price": Decimal("19.99")},
        "task['price'] is Decimal('19.99'): JSON has no decimal type, and a float would lose "
        "digits (the TypeScript side reads a double); send str() of it",
    ),
    (object(), "task: Object of type object is not JSON serializable"),
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("empty_claims")
@pytest.mark.parametrize(("task", "culprit"), NOT_JSON)
def test_a_task_json_cannot_hold_is_refused_naming_its_path(task: Any, culprit: str) -> None:
    expected = f"task is not JSON-serialisable: {culprit}"
    job = ClaimedTask(
        print, queue="default", max_retries=0, parse=None, retry_after_ms=None, window_seconds=60
    )
    queue = RecordingQueue()
    for enqueue in (
        lambda: enqueue_claimed(queue, "k", task, window_seconds=60),
        lambda: enqueue_claimed(queues["default"], "k", task, window_seconds=60),
        lambda: job.enqueue("k", task),
    ):
        with pytest.raises(NotJSONError) as raised:
            enqueue()
        assert str(raised.value).startswith(expected)
    assert queue.sent == []
    assert claims() == {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM taskclaim.message WHERE body LIKE '%\"k\"%'")
        assert cursor.fetchone() == (0,)


def test_a_circular_task_is_refused_without_a_path() -> None:
    task: list[Any] = [1]
    task.append(task)
    with pytest.raises(NotJSONError, match=r"^task is not JSON-serialisable: Circular reference"):
        encode_json(task, name="task")


def test_a_value_json_cannot_hold_is_both_a_type_and_a_value_error() -> None:
    for value in (math.nan, {"a": object()}, {1: 2}):
        with pytest.raises(NotJSONError, match=r"^task is not JSON-serialisable: ") as raised:
            encode_json(value, name="task")
        assert isinstance(raised.value, TypeError)
        assert isinstance(raised.value, ValueError)


def test_a_queue_names_the_body_as_the_path_to_a_bad_key() -> None:
    with pytest.raises(TypeError, match=r"^queue 'm': body is not .* body\['task'\] has the key 7"):
        MemoryQueue("m").encode(message_body("k", PLACEHOLDER_TOKEN, 1, {7: 1}))


@pytest.mark.parametrize(("window", "wire"), [(300, "300"), (300.0, "300"), (0.5, "0.5"), (0, "0")])
def test_window_goes_on_the_wire_as_javascript_writes_it(window: float, wire: str) -> None:
    token = "0b6f3c1e-8d52-4d5e-9a43-2b7f0d8e9c11"
    body = encode_json(message_body("project:42", token, window, {"id": 42}), name="body")
    expected = f'{{"key":"project:42","claim":"{token}","windowSeconds":{wire},"task":{{"id":42}}}}'
    assert body == expected


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
)


@given(
    key=st.text(min_size=1),
    window=st.integers(0, 10**11) | st.floats(0, 1e11),
    task=JSON,
    upper=st.booleans(),
)
def test_the_writer_gives_the_encoded_body_byte_for_byte(
    key: str, window: float, task: Any, upper: bool
) -> None:
    token = str(uuid.uuid4())
    token = token.upper() if upper else token
    task_json = encode_json(task, name="task")
    written = body_writer(window)(key, token, task_json)
    assert written == encode_json(message_body(key, token, window, task), name="body")


def deep_list(depth: int) -> list[Any]:
    task: list[Any] = []
    for _ in range(depth):
        task = [task]
    return task


def test_a_lone_surrogate_in_a_task_is_named() -> None:
    with pytest.raises(ValueError, match="task is not valid Unicode text: surrogates not allowed"):
        encode_json({"name": "caf\udce9"}, name="task")
    with pytest.raises(ValueError, match="items\\[3\\] task is not valid Unicode"):
        encode_json(["\udce9"], name="items[3] task")


def test_a_surrogate_in_a_dict_key_is_named_too() -> None:
    with pytest.raises(ValueError, match="task is not valid Unicode text"):
        encode_json({"caf\udce9": 1}, name="task")


def test_a_task_too_deep_for_the_encoder_is_named() -> None:
    with pytest.raises(ValueError, match=r"^task nests too deeply to encode as JSON$"):
        encode_json(deep_list(100_000), name="task")


def test_valid_non_ascii_text_passes_unchanged() -> None:
    assert encode_json({"n": "Zoë 🚀"}, name="task") == '{"n":"Zoë 🚀"}'
    assert encode_json(deep_list(50), name="task") == "[" * 51 + "]" * 51


def test_the_placeholder_is_as_long_as_every_token() -> None:
    assert is_token(PLACEHOLDER_TOKEN)
    assert len(PLACEHOLDER_TOKEN) == len(str(uuid.uuid4()))


def test_parse_body_applies_the_key_and_window_rules_of_the_claim_functions() -> None:
    token = str(uuid.uuid4())
    good = {"key": "é" * 512, "claim": token, "windowSeconds": 10**11}
    assert parse_body(good) is not None
    for bad in ({"key": "é" * 513}, {"key": ""}, {"key": "a\x00"}, {"windowSeconds": 1e300}):
        assert parse_body({**good, **bad}) is None


def test_an_envelope_keeps_its_fields() -> None:
    claim = str(uuid.uuid4()).upper()
    found = parse_body({"key": "k", "claim": claim, "windowSeconds": 300, "task": [1]})
    assert found is not None
    assert (found.key, found.claim, found.window_seconds, found.task) == ("k", claim, 300, [1])


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
)


@given(JSON)
def test_any_json_without_a_claim_is_malformed(body: object) -> None:
    assert parse_body(body) is None


class _Text(str):
    """A ``str`` subclass: a body from a memory queue may hold one."""


def _fully_checked(key: object, window: object) -> bool:
    try:
        validate_key(key)
        validate_seconds(window, name="windowSeconds")
    except (TypeError, ValueError):
        return False
    return True


KEYS = (
    st.text(max_size=40)
    | st.text(alphabet=st.characters(max_codepoint=127), min_size=1020, max_size=1030)
    | st.text(alphabet="é", min_size=510, max_size=515)
    | st.sampled_from(["a\x00", "\ud800", _Text("k"), b"k", 0, None, ""])
)
WINDOWS = (
    st.integers(min_value=-2, max_value=MAX_SECONDS + 2)
    | st.sampled_from([-1, 0, MAX_SECONDS, MAX_SECONDS + 1, True, False, None, "300"])
    | st.floats(allow_nan=True, allow_infinity=True)
)


@given(KEYS, WINDOWS)
def test_parse_body_accepts_exactly_what_the_full_checks_accept(
    key: object, window: object
) -> None:
    # The fast path for the common body must not let through anything the
    # claim functions' checks refuse, nor refuse anything they accept.
    body = {"key": key, "claim": str(uuid.uuid4()), "windowSeconds": window, "task": 1}
    found = parse_body(body)
    assert (found is not None) == _fully_checked(key, window)
    if found is not None:
        assert (found.key, found.window_seconds) == (key, window)
