"""The PostgreSQL queue's ``OPTIONS``: their parsers, defaults and the
check across them and the settings (``PostgresQueue.option_spec``).

``database`` (an alias of a PostgreSQL entry of ``DATABASES``, default
``TASKCLAIM_DATABASE``), ``queue_name`` (default: the alias; at most
:data:`_MAX_QUEUE_NAME_BYTES`), ``visibility_timeout`` and ``poll_interval``
(seconds) and ``listen``.
"""

from __future__ import annotations

from typing import Any

from django.db import connections

from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.queues import options as opts
from astral_taskclaim.queues.messages import MAX_DELAY_SECONDS

_DEFAULT_VISIBILITY_TIMEOUT = 60.0
_DEFAULT_POLL_INTERVAL = 2.0
#: The NOTIFY channel is ``taskclaim.<queue_name>``: 10 bytes of prefix and
#: the name must fit PostgreSQL's 63-byte identifiers.
_MAX_QUEUE_NAME_BYTES = 53


def _database(value: Any) -> str:
    """Option ``database``: an alias of a PostgreSQL entry of ``DATABASES``."""
    if not isinstance(value, str) or value not in connections.settings:
        raise ValueError("must name an entry of DATABASES")
    engine = str(connections.settings[value].get("ENGINE", ""))
    if not engine.startswith("django.db.backends.postgresql"):
        raise ValueError(f"is not PostgreSQL ({engine})")
    return value


OPTIONS = {
    "database": opts.Option(
        _database,
        default_factory=lambda alias: app_settings.DATABASE,
        check_id="E011",
    ),
    "queue_name": opts.queue_name_option(_MAX_QUEUE_NAME_BYTES),
    "visibility_timeout": opts.seconds_option(_DEFAULT_VISIBILITY_TIMEOUT, MAX_DELAY_SECONDS),
    "poll_interval": opts.seconds_option(_DEFAULT_POLL_INTERVAL, 3600),
    "listen": opts.Option(opts.flag, default=True),
}


def database_problems(config: dict[str, Any]) -> list[opts.Problem]:
    """W018 when ``database`` is not ``TASKCLAIM_DATABASE``."""
    claims_alias = app_settings.DATABASE
    if config["database"] == claims_alias:
        return []
    hint = "The queue's table lives in TASKCLAIM_DATABASE's database: point this alias at "
    hint += "the same database. Its sends join transactions of this alias only."
    problem = f"is not TASKCLAIM_DATABASE ({claims_alias!r})"
    return [opts.Problem("W018", problem, "database", repr(config["database"]), hint)]
