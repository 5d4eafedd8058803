"""Numbers in a body are written as JavaScript's ``JSON.stringify`` writes
them (ECMAScript ``Number::toString``), checked against Node itself."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from astral_taskclaim.core.envelope import (
    PLACEHOLDER_TOKEN,
    body_writer,
    decode_body,
    encode_json,
    message_body,
    parse_body,
)

# What Node v20 writes for each (JSON.stringify), checked in with the test
# so it runs where Node is absent; test_the_table_is_what_node_writes checks
# the table itself wherever Node is.
KNOWN = [
    (1.0, "1"),
    (-0.0, "0"),
    (0.0, "0"),
    (300.0, "300"),
    (0.5, "0.5"),
    (-2.5, "-2.5"),
    (0.00001, "0.00001"),
    (0.000001, "0.000001"),
    (1.5e-6, "0.0000015"),
    (1e-7, "1e-7"),
    (-1.5e-7, "-1.5e-7"),
    (1e-10, "1e-10"),
    (5e-324, "5e-324"),
    (123456789.125, "123456789.125"),
    (1e15, "1000000000000000"),
    (1e16, "10000000000000000"),
    (-1.2345e17, "-123450000000000000"),
    (2.0**53, "9007199254740992"),
    (1e20, "100000000000000000000"),
    (1.5e20, "150000000000000000000"),
    (1e21, "1e+21"),
    (1.5e22, "1.5e+22"),
    (1e170, "1e+170"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (0.1 + 0.2, "0.30000000000000004"),
]

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")


def node_stringify(values: list[Any]) -> list[str]:
    """``JSON.stringify`` of each of ``values`` in one Node process (fed
    their JSON: Python's float text reads back as the same double)."""
    assert NODE is not None
    script = (
        "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>"
        "process.stdout.write(JSON.stringify(JSON.parse(s).map(v=>JSON.stringify(v)))))"
    )
    done = subprocess.run(  # a fixed script, our own input
        [NODE, "-e", script],
        input=json.dumps(values),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    written: list[str] = json.loads(done.stdout)
    return written


@pytest.mark.parametrize(("value", "javascript"), KNOWN)
def test_a_float_is_written_as_javascript_writes_it(value: float, javascript: str) -> None:
    assert encode_json(value, name="task") == javascript
    assert encode_json({"x": [value]}, name="task") == f'{{"x":[{javascript}]}}'
    assert json.loads(javascript) == value  # the same number, read back


@needs_node
def test_the_table_is_what_node_writes() -> None:
    assert node_stringify([value for value, _ in KNOWN]) == [js for _, js in KNOWN]


@needs_node
@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=200))
def test_any_float_is_written_byte_for_byte_as_node_writes_it(values: list[float]) -> None:
    assert [encode_json(value, name="task") for value in values] == node_stringify(values)


def test_text_that_looks_like_a_number_is_left_alone() -> None:
    task = {"v1.0": "1.0", "e": ["1e-05", "2e+16", 'say "1.0"', "\\1.0"], "n": 1.0}
    assert encode_json(task, name="task") == (
        '{"v1.0":"1.0","e":["1e-05","2e+16","say \\"1.0\\"","\\\\1.0"],"n":1}'
    )


def test_ints_are_written_with_all_their_digits() -> None:
    # No JavaScript number holds 2**64 exactly: it is sent as Python has it.
    assert encode_json([1, -7, 2**64, True, None], name="task") == (
        "[1,-7,18446744073709551616,true,null]"
    )


def test_the_window_and_the_writer_write_numbers_as_javascript_does() -> None:
    body = message_body("k", PLACEHOLDER_TOKEN, 0.00001, {"n": 1e16})
    expected = (
        f'{{"key":"k","claim":"{PLACEHOLDER_TOKEN}","windowSeconds":0.00001,'
        '"task":{"n":10000000000000000}}'
    )
    assert encode_json(body, name="body") == expected
    task_json = encode_json({"n": 1e16}, name="task")
    assert body_writer(0.00001)("k", PLACEHOLDER_TOKEN, task_json) == expected


def test_a_body_so_written_reads_back_as_the_same_numbers() -> None:
    task = {"whole": 1.0, "small": 0.00001, "big": 1e16, "tiny": 1e-7}
    text = encode_json(message_body("k", PLACEHOLDER_TOKEN, 0.00001, task), name="body")
    envelope = parse_body(decode_body(text))
    assert envelope is not None
    assert envelope.window_seconds == 0.00001
    # Equal as numbers; a whole float arrives as an int, as from TypeScript.
    assert envelope.task == task
    assert type(envelope.task["whole"]) is int


def test_a_typescript_body_parses() -> None:
    # Written by JSON.stringify in Node v20 (the TypeScript producer's encoder).
    text = (
        '{"key":"room:1","claim":"0b6f3c1e-8d52-4d5e-9a43-2b7f0d8e9c11",'
        '"windowSeconds":0.00001,"task":{"a":1,"b":0.000001,"c":1e-7,"d":1e+21,'
        '"e":10000000000000000}}'
    )
    envelope = parse_body(decode_body(text))
    assert envelope is not None
    assert envelope.window_seconds == 0.00001
    assert envelope.task == {"a": 1, "b": 0.000001, "c": 1e-7, "d": 1e21, "e": 10**16}
    # And it is written back byte for byte.
    assert encode_json(json.loads(text), name="body") == text


def same_numbers(read: Any, sent: Any) -> bool:
    """Whether ``read`` is ``sent`` as JSON.parse gives it back: each float
    the same double (``float()`` of an int its digits became)."""
    if isinstance(sent, float):
        return isinstance(read, int | float) and float(read) == sent
    if isinstance(sent, dict):
        return read.keys() == sent.keys() and all(same_numbers(read[k], sent[k]) for k in sent)
    if isinstance(sent, list):
        return len(read) == len(sent) and all(map(same_numbers, read, sent))
    return bool(read == sent) and type(read) is type(sent)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
)


@given(JSON)
def test_every_number_reads_back_as_the_number_sent(value: Any) -> None:
    text = encode_json(value, name="task")
    assert same_numbers(json.loads(text), value)
    assert encode_json(json.loads(text), name="task") == text  # and is written again alike
