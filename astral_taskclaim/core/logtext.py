"""Text from outside put safely into a log message.

Keys come from callers and from queue messages anyone with send access can
write; error texts can quote them. Interpolated raw into a plain-text log
message, a newline in such text starts what reads as a second, forged log
record, and terminal escapes can rewrite what an operator sees. Every log
message of the package that includes a key, a queue name or an error's text
passes it through :func:`printable`. (The ``extra`` values stay as they
are: structured handlers encode them themselves.) Such text written to
PostgreSQL (the run history, a Django Task's errors) passes through
:func:`storable`.
"""

from __future__ import annotations

__all__ = ["counted", "printable"]

#: Escapes for the characters most often met, as Python writes them.
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(value: object) -> str:
    """``str(value)`` with every non-printable character (controls, line
    and paragraph separators, format characters such as bidirectional
    overrides) written as a backslash escape: ``"a\\nb"`` logs as
    ``a\\nb`` on one line. Printable text comes back unchanged."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escape(char) for char in text)


def _escape(char: str) -> str:
    short = _SHORT_ESCAPES.get(char)
    if short is not None:
        return short
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def storable(text: str) -> str:
    """``text`` as PostgreSQL ``text`` and ``jsonb`` can hold it: NUL written
    ``\\x00`` and a lone surrogate as its backslash escape; other text,
    newlines included, unchanged."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def counted(count: int, noun: str) -> str:
    """``"1 message"``, ``"2 messages"``: ``count`` and ``noun``, plural but for 1."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
