"""The JSON text of message bodies: what ``JSON.stringify`` writes.

Compact, strict (no NaN, ``str`` keys only), with numbers as ECMAScript
writes them, so a body is byte for byte a TypeScript producer's. Python's C
encoder writes the text; only the floats it writes otherwise are rewritten.
An ``int`` keeps all its digits. :func:`not_json_place` is the one finder of
where a value holds what JSON cannot.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

_CONTAINERS = (dict, list, tuple)

# Where a container sits: its parent's place and its key or index there
# (a linked list, so reaching a child costs one small tuple, whatever its depth).
_Place = tuple["_Place | None", object]


class NotJSONError(TypeError, ValueError):
    """A value that does not encode as strict JSON (a type JSON lacks, NaN,
    a circular reference, an object key that is not a ``str``). Both a
    ``TypeError`` and a ``ValueError``, so code catching either sees it."""


class _BodyEncoder(json.JSONEncoder):
    """Python's C encoder, its floats written as JavaScript writes them."""

    def encode(self, o: Any) -> str:
        text = super().encode(o)
        return _javascript_floats(text) if _scan(o, None, "") else text


#: The JSON encoding of message bodies: compact, UTF-8 text kept as it is,
#: strict numbers written as JavaScript writes them (:func:`encode_json`
#: also refuses object keys other than ``str``).
JSON_ENCODER = _BodyEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def encode_json(value: object, *, name: str, root: str | None = None) -> str:
    """``value`` as the compact JSON of message bodies (:data:`JSON_ENCODER`'s).

    Raises, naming ``name`` and the path inside ``value`` (``root`` names
    ``value`` in it; default: ``name``), before anything is written:
    :class:`NotJSONError` for a value JSON cannot hold exactly (a type it
    lacks, a ``Decimal``, NaN or Infinity, a circular reference, an object
    key other than a ``str``, which the encoder would silently turn into a
    string and so could repeat a key), ``ValueError`` for a value nested
    deeper than the encoder goes or holding a lone surrogate (not valid
    Unicode, so no queue can send it).
    """
    try:
        text = _ENCODE(value)
    except (TypeError, ValueError) as error:
        where = not_json_place(value, root or name, error)
        raise NotJSONError(f"{name} is not JSON-serialisable: {where or error}") from None
    except RecursionError:
        # Raised from deep in the encoder; the traceback would only repeat it.
        raise ValueError(f"{name} nests too deeply to encode as JSON") from None
    # A lone surrogate (a non-UTF-8 byte read with surrogateescape) survives
    # the encoder; ASCII text cannot hold one.
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ValueError(f"{name} is not valid Unicode text: {error.reason}") from None
    # No brace: no object key to check; no "." or "e": no float (repr has one).
    if ("{" in text or "." in text or "e" in text) and _scan(value, name, root or name):
        return _javascript_floats(text)
    return text


def _scan(value: object, name: str | None, root: str) -> bool:
    """Whether encoded ``value`` holds a float; with a ``name``, first
    :class:`NotJSONError` for an object key that is not a ``str``."""
    if not isinstance(value, _CONTAINERS):
        return isinstance(value, float)
    holds_float = False
    # Iterative, so it goes as deep as the encoder did without recursing.
    pending: list[tuple[object, _Place | None]] = [(value, None)]
    while pending:
        node, place = pending.pop()
        if isinstance(node, dict):
            for key in node if name is not None else ():
                if not isinstance(key, str):
                    why = _why(key, _path(root, place), None, key=True, loose=False)
                    raise NotJSONError(f"{name} is not JSON-serialisable: {why}")
            children: Any = node.items()
        else:
            children = enumerate(node)  # type: ignore[arg-type]
        for step, child in children:
            if isinstance(child, _CONTAINERS):
                pending.append((child, (place, step)))
            elif isinstance(child, float):
                holds_float = True
    return holds_float


# A float whose repr JavaScript writes otherwise (or such text in a string,
# left alone by the rewrite): a whole number ("300.0", "-0.0"), or an
# exponent JavaScript writes in full (1e16 to 1e20, 1e-5 and 1e-6) or
# without its leading zero ("1e-07").
_DIFFERENT_FLOAT = re.compile(r"\d(?:\.0\b|e(?:\+1[6-9]|\+20|-0))")
# A string (kept as it is) or a number of the encoded text.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|-?\d+(?:\.\d+)?(?:e[-+]?\d+)?')


def _javascript_floats(text: str) -> str:
    if _DIFFERENT_FLOAT.search(text) is None:
        return text  # every float written as JavaScript writes it (0.5, 1e+21)
    return _TOKEN.sub(_javascript_token, text)


def _javascript_token(match: re.Match[str]) -> str:
    token = match.group()
    if token[0] == '"' or not ("." in token or "e" in token):
        return token  # a string, or an int
    return _javascript_number(float(token))


def _javascript_number(value: float) -> str:
    """A finite ``value`` as ECMAScript's ``Number::toString`` (and so
    ``JSON.stringify``) writes it: the shortest digits that read back as
    ``value`` (``repr``'s, which are JavaScript's), in plain notation from
    1e-6 up to 1e21 without a trailing ``.0``, otherwise as ``1.5e-7`` or
    ``1e+21``; ``-0.0`` as ``0``."""
    if value == 0:
        return "0"
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    if exponent:  # one digit before the point
        point = int(exponent) + 1
    elif whole != "0":
        point = len(whole)
    else:  # 0.000ddd: the point is before the fraction's zeros
        zeros = len(fraction) - len(fraction.lstrip("0"))
        point, fraction = -zeros, fraction[zeros:]
    digits = (whole.lstrip("0") + fraction).rstrip("0")
    # value = 0.digits x 10**point: ECMAScript's s, k and n are digits, size and point.
    size = len(digits)
    if size <= point <= 21:
        text = digits + "0" * (point - size)
    elif 0 < point <= 21:
        text = f"{digits[:point]}.{digits[point:]}"
    elif -6 < point <= 0:
        text = f"0.{'0' * -point}{digits}"
    else:
        rest = f".{digits[1:]}" if size > 1 else ""
        text = f"{digits[0]}{rest}e{point - 1:+d}"
    return f"-{text}" if value < 0 else text


def not_json_place(
    value: object, root: str, error: BaseException, *, loose: bool = False
) -> str | None:
    """Where ``value`` (called ``root``) first holds, in document order,
    what JSON cannot, and why: ``task['items'][2]: Object of type datetime
    is not JSON serializable`` (``error`` is the encoder's), ``task['x'] is
    nan (JSON has no NaN or infinity)``, ``task['price'] is
    Decimal('1.10')``, with why JSON has no place for it. ``None`` when no
    place is to blame (a circular reference).

    ``loose``: as Django's ``normalize_json`` reads arguments (any mapping
    or sequence, ``bytes`` of UTF-8 text, keys of any JSON scalar).
    """
    mapping, containers = (Mapping, (Mapping, Sequence)) if loose else (dict, _CONTAINERS)
    seen: set[int] = set()
    pending: list[tuple[object, _Place | None, bool]] = [(value, None, False)]
    while pending:
        node, place, is_key = pending.pop()
        if is_key:
            if not (_is_scalar(node, loose) if loose else isinstance(node, str)):
                return _why(node, _path(root, place), error, key=True, loose=loose)
        elif isinstance(node, containers) and not isinstance(node, str | bytes):
            if id(node) in seen:
                continue  # a cycle, or a part already looked at
            seen.add(id(node))
            if isinstance(node, mapping):
                here = [
                    entry
                    for key, child in node.items()  # type: ignore[attr-defined]
                    for entry in ((key, place, True), (child, (place, key), False))
                ]
            else:
                here = [(child, (place, i), False) for i, child in enumerate(node)]  # type: ignore[arg-type]
            pending.extend(reversed(here))
        elif not _is_scalar(node, loose):
            return _why(node, _path(root, place), error, key=False, loose=loose)
    return None


def _is_scalar(value: object, loose: bool) -> bool:
    """Whether ``value`` is a JSON scalar (``bool`` is an ``int``)."""
    if value is None or isinstance(value, str | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if loose and isinstance(value, bytes):
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True
    return False


def _why(culprit: object, path: str, error: object, *, key: bool, loose: bool) -> str:
    what = f"{path} {'has the key' if key else 'is'} {culprit!r:.60}"
    if isinstance(culprit, float) and not math.isfinite(culprit):
        return f"{what} (JSON has no NaN or infinity)"
    if isinstance(culprit, Decimal):
        return (
            f"{what}: JSON has no decimal type, and a float would lose digits (the "
            "TypeScript side reads a double); send str() of it"
        )
    if loose and isinstance(culprit, bytes):
        return f"{what}: bytes, not UTF-8 text"
    if key:
        kinds = "str, int, float, bool or None" if loose else "str"  # as Django's json.dumps
        return f"{what} ({type(culprit).__name__}); JSON object keys must be {kinds}"
    return f"{path}: {error}"


def _path(root: str, place: _Place | None) -> str:
    steps: list[object] = []
    while place is not None:
        place, step = place
        steps.append(step)
    return root + "".join(f"[{step!r}]" for step in reversed(steps))
