"""printable: outside text put into a log message on one line."""

from __future__ import annotations

import pytest

from astral_taskclaim.core.logtext import printable


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("project:42", "project:42"),
        ("Zoë 🚀 a b", "Zoë 🚀 a b"),
        ("a\nb\r\tc", "a\\nb\\r\\tc"),
        ("\x00\x1b[2J\x7f\x85", "\\x00\\x1b[2J\\x7f\\x85"),
        ("line\u2028sep\u2029par", "line\\u2028sep\\u2029par"),
        ("\u202eevil", "\\u202eevil"),
        ("caf\udce9", "caf\\udce9"),
        ("\U000e0041", "\\U000e0041"),
    ],
)
def test_every_non_printable_character_is_escaped(text: str, shown: str) -> None:
    assert printable(text) == shown
    assert printable(text).isprintable()


def test_any_value_is_shown_as_its_str() -> None:
    assert printable(ValueError("bad\nkey")) == "bad\\nkey"
    assert printable(42) == "42"
