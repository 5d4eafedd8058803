"""Reading a received body's text: what json.loads gives, or the text it refuses."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from astral_taskclaim.core.envelope import decode_body

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
)


@given(JSON)
def test_a_body_decodes_as_json_loads_reads_it(value: object) -> None:
    # Compact (the fast path), then padded and indented (json.loads's path).
    for text in (json.dumps(value), f" {json.dumps(value)}\n", json.dumps(value, indent=1)):
        # Compared as JSON text: NaN is equal to nothing, itself included.
        assert json.dumps(decode_body(text)) == json.dumps(json.loads(text))


def test_a_body_json_loads_refuses_stays_text() -> None:
    for text in ("{} {}", "[1,", "\ufeff{}", "{}x", "[" * 10_000 + "]" * 10_000):
        assert decode_body(text) == text
