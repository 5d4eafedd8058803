"""Row 13, Django's public paths against the package's own, in one run,
interleaved, so each of the package's fast paths keeps a figure that says
why it is there.

- 13.1 to 13.3: row 1's workloads (fresh keys; keys already held; fresh
  keys with ``synchronous_commit`` off) sent as ``statements.run`` sends
  them (:class:`~astral_taskclaim.db.statements.Connector`, prepared on
  Django's connection) against Django's public path, ``connection.cursor()``
  and ``execute()``, on a connection with Django's own ``OPTIONS``
  ``server_side_binding: True`` and ``prepare_threshold: 5`` (so psycopg
  prepares the statement after its fifth run), and against Django's default
  cursor (client-side binding, never prepared). The headline is the public
  path's rate over the connector's: the connector is kept while the public
  path is more than 10% slower (the target "holds" then).
- 13.4 is retired: it measured the package's own async pool against
  ``psycopg_pool.AsyncConnectionPool``, which the package now uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import DatabaseError
from django.db.backends.base.base import BaseDatabaseWrapper

from astral_taskclaim.core.not_migrated import explains_missing_tables
from astral_taskclaim.db import sqlfiles
from astral_taskclaim.db.connections import drop_if_read_only
from astral_taskclaim.db.statements import _explains_event_loop

from . import claim_floor
from .common import Context, Figure, alternating_rates
from .report import Row

CONNECTOR = "Connector (statements.run)"
PUBLIC = "connection.cursor(), server_side_binding"
DEFAULT = "connection.cursor(), Django's default"
#: The connector stays while the public path runs at less than this share of it.
CURSOR_RULE = 0.90
CHUNK = claim_floor.CHUNK
HOT = claim_floor.HOT
#: Public-path connection options: Django's own, as documented.
PUBLIC_OPTIONS = {"server_side_binding": True, "prepare_threshold": 5}

#: Row 1's workloads: (row, title, keys already held, synchronous_commit off)
VARIANTS = tuple(
    (f"13.{i}", "public cursor vs Connector, " + title.removeprefix("claim floor, "), hot, off)
    for i, (_, title, hot, off) in enumerate(claim_floor.VARIANTS, 1)
)


def run(ctx: Context, *, claims: int = 5000) -> list[Row]:
    """Rows 13.1 to 13.3 as described above."""
    return [_cursor_row(ctx, *variant, claims=claims) for variant in VARIANTS]


def _cursor_row(
    ctx: Context, number: str, title: str, hot: bool, async_commit: bool, *, claims: int
) -> Row:
    from django.db import connections

    from astral_taskclaim.db import statements

    connection = connections["default"]
    # The connector and the public path share one connection, opened with
    # the public options (the connector prepares its statements itself, so
    # they change nothing for it): only the code paths differ. Django's
    # default cursor gets a second connection with the settings as they were.
    options = connection.settings_dict.get("OPTIONS") or {}
    plain = type(connection)({**connection.settings_dict, "OPTIONS": options}, connection.alias)
    connection.close()
    connection.settings_dict["OPTIONS"] = {**options, **PUBLIC_OPTIONS}
    per_chunk = min(CHUNK, ctx.size(claims, minimum=10))
    chunks = max(1, ctx.size(claims, minimum=10) // per_chunk)
    held = [f"public:{number}:held:{i}" for i in range(HOT)]
    names = (CONNECTOR, PUBLIC, DEFAULT)
    figures = {name: Figure("claims/s") for name in names}

    def key(side: str, index: int, chunk: int, i: int) -> str:
        return held[i % HOT] if hot else f"public:{number}:{index}:{chunk}:{side}:{i}"

    path = "taskclaim/claim.sql"
    senders: dict[str, Callable[[dict[str, Any]], object]] = {
        CONNECTOR: lambda params: statements.run("default", path, params),
        PUBLIC: lambda params: public_run(connection, path, params),
        DEFAULT: lambda params: public_run(plain, path, params),
    }
    setting = "SET synchronous_commit = " + ("off" if async_commit else "on")
    try:
        for wrapper in (connection, plain):
            with wrapper.cursor() as cursor:
                cursor.execute(setting)
        for name, send in senders.items():  # warm: connect, plan, prepare
            for i in range(20):
                send({"key": f"public:{number}:warm:{name}:{i}", "seconds": 300.0})
        for k in held:
            statements.run("default", path, {"key": k, "seconds": 3600.0})
        for index in range(ctx.runs):

            def side(name: str, index: int = index) -> Callable[[int], int]:
                send, tag = senders[name], str(names.index(name))

                def chunk_of(chunk: int) -> int:
                    for i in range(per_chunk):
                        send({"key": key(tag, index, chunk, i), "seconds": 300.0})
                    return per_chunk

                return chunk_of

            # Each run starts with another side, so none is always between two.
            order = names[index % 3 :] + names[: index % 3]
            rates = alternating_rates({n: side(n) for n in order}, chunks=chunks, run=index)
            for name, value in rates.items():
                figures[name].add(value)
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM taskclaim.claim WHERE key LIKE 'public:%'")
    finally:
        plain.close()
        connection.close()  # synchronous_commit and the options as they were
        connection.settings_dict["OPTIONS"] = options
    ratio = figures[PUBLIC].median / figures[CONNECTOR].median
    default = figures[DEFAULT].median / figures[CONNECTOR].median
    return Row(
        number,
        title,
        f"{ratio:.2f}x Connector ({figures[PUBLIC].median:,.0f} vs "
        f"{figures[CONNECTOR].median:,.0f}/s; Django's default cursor {default:.2f}x)",
        f"< {CURSOR_RULE:.2f}x keeps the Connector",
        ratio < CURSOR_RULE,
        figures,
        value=ratio,
        details={
            **claim_floor.workload(per_chunk * chunks, per_chunk, hot, async_commit),
            "public_options": PUBLIC_OPTIONS,
            "default_cursor_ratio": default,
        },
    )


@explains_missing_tables
@_explains_event_loop
def public_run(
    connection: BaseDatabaseWrapper, path: str, params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """What ``statements.run`` would be on Django's public path: the shipped
    file through ``connection.cursor()``, with the same error handling."""
    query = sqlfiles.read(path)
    try:
        with connection.cursor() as cursor:
            cursor.execute(query, params)
            return cursor.fetchall() if cursor.description else []
    except DatabaseError as error:
        drop_if_read_only(connection, error)
        raise
