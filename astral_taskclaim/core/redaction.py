"""Keeping credentials out of log records, error messages and reprs.

:func:`redact` replaces each shape a credential takes in text (``repr``,
bytes, percent-encoded, JSON-escaped). :func:`_configured_secrets` gathers
the database passwords and queue credentials, once per change of those
settings.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

from django.conf import settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

REDACTED = "[redacted]"


def _representations(secret: str) -> set[str]:
    """Every way ``secret`` may be written in text: as is, as Python's
    ``repr`` of the text and of its UTF-8 bytes shows it, JSON-escaped,
    backslash-escaped and percent-encoded (with and without ``+`` for
    spaces)."""
    if not secret:
        return set()
    encoded = secret.encode("utf-8", "surrogatepass")
    shapes = {
        secret,
        repr(secret)[1:-1],
        repr(encoded)[2:-1],
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        secret.encode("unicode_escape").decode("ascii"),
        quote(secret, safe=""),
        quote(secret),
        quote_plus(secret),
    }
    # Either kind of quote may be the one ``repr`` escaped.
    shapes |= {shape.replace("'", "\\'") for shape in shapes}
    shapes |= {shape.replace('"', '\\"') for shape in shapes}
    return {shape for shape in shapes if shape}


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every representation of each of ``secrets`` replaced
    by ``[redacted]``; the longest shapes go first, so a shape that
    contains another is replaced whole."""
    return _replace_shapes(text, _longest_first(secrets))


def _longest_first(secrets: Iterable[str]) -> tuple[str, ...]:
    shapes: set[str] = set()
    for secret in secrets:
        shapes |= _representations(secret)
    return tuple(sorted(shapes, key=len, reverse=True))


def _replace_shapes(text: str, shapes: tuple[str, ...]) -> str:
    for shape in shapes:
        text = text.replace(shape, REDACTED)
    return text


@functools.cache
def _configured_shapes() -> tuple[str, ...]:
    """The shapes of the settings' secrets, computed once: the filter runs on
    every log record, and gathering them imports every queue backend."""
    return _longest_first(_configured_secrets())


def _forget_configured_shapes(*, setting: str, **kwargs: Any) -> None:
    if setting in ("DATABASES", "TASKCLAIM_QUEUES"):
        _configured_shapes.cache_clear()


setting_changed.connect(_forget_configured_shapes)


def _configured_secrets(*queues: Any) -> list[str]:
    """The database passwords, the secret options of every configured queue,
    and the credentials of ``queues`` (any object with a ``credentials()``
    method, such as a remote queue backend)."""
    found: list[str] = []
    for database in getattr(settings, "DATABASES", {}).values():
        options = database.get("OPTIONS") or {}
        found += [database.get("PASSWORD") or "", options.get("password") or ""]
    for config in (getattr(settings, "TASKCLAIM_QUEUES", None) or {}).values():
        found += _queue_setting_secrets(config)
    for queue in queues:
        credentials = getattr(queue, "credentials", None)
        if callable(credentials):
            found += credentials()
    return [secret for secret in dict.fromkeys(found) if isinstance(secret, str) and secret]


def redact_configured(text: str, *queues: Any) -> str:
    """``text`` with every configured secret (see :func:`_configured_secrets`)
    redacted."""
    return redact(text, _configured_secrets(*queues))


def _queue_setting_secrets(config: Any) -> list[str]:
    """The values of a ``TASKCLAIM_QUEUES`` entry's secret options."""
    if not isinstance(config, dict) or not isinstance(config.get("OPTIONS"), dict):
        return []
    try:
        backend = import_string(str(config.get("BACKEND")))
    except ImportError:
        return []
    spec = getattr(backend, "option_spec", None) or {}
    values = []
    for name, option in spec.items():
        value = config["OPTIONS"].get(name)
        if getattr(option, "secret", False) and value is not None:
            reveal = getattr(value, "reveal", None)
            values.append(reveal() if callable(reveal) else value)
    return values


class _RedactingFilter(logging.Filter):
    """A logging filter that redacts :func:`_configured_secrets` from a
    record's message and traceback before any handler sees it.

    Attached to the loggers of the modules that log error text from
    outside (database drivers, HTTP and AWS clients, tasks). A record that
    needed redacting carries its traceback as redacted ``exc_text`` and no
    ``exc_info``, so no formatter can render the original."""

    def filter(self, record: logging.LogRecord) -> bool:
        shapes = _configured_shapes()
        if not shapes:
            return True
        message = record.getMessage()
        clean = _replace_shapes(message, shapes)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info:
            trace = logging.Formatter().formatException(record.exc_info)
            clean = _replace_shapes(trace, shapes)
            if clean != trace:
                record.exc_info, record.exc_text = None, clean
        return True


#: The one filter instance the package's loggers share.
redacting_filter = _RedactingFilter()
