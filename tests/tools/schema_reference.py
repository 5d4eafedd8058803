"""The schema all the app's migrations build, as one normalised listing.

:func:`listing` reads schemas ``slug`` and ``taskclaim`` from the catalog
of a migrated database and writes them as SQL, one block per object,
grouped by the family of SQL files that owns each table (:data:`OWNERS`):
what the migrations' history adds up to, and who may write it. The
committed listing is ``astral_taskclaim/db/sql/schema_reference.sql``;
``tests/db/test_schema_reference.py`` compares it with the test database,
freshly migrated. After adding a migration, regenerate it on PostgreSQL
17+ (``make schema-reference``, or ``python -m tests.tools.schema_reference``)
and review the difference.

Grants and owners are left out: they follow settings
(``TASKCLAIM_SERVICE_ROLE``, ``TASKCLAIM_ADMIN_ROLE``), not migrations.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

PATH = Path(__file__).resolve().parents[2] / "astral_taskclaim/db/sql/schema_reference.sql"

#: Each table, function or sequence -> the SQL family owning it: its
#: statements are the ones that create, write and alter it.
OWNERS = {
    "slug.slug(name text)": "slug",
    "taskclaim.claim": "taskclaim",
    "taskclaim.cron_database()": "taskclaim",
    "taskclaim.delete_expired()": "taskclaim",
    "taskclaim.follow_up": "taskclaim",
    "taskclaim.message": "queue",
    "taskclaim.message_id_seq": "queue",
    "taskclaim.notify_message()": "queue",
    "taskclaim.task_result": "tasks",
    "taskclaim.delete_task_results(keep interval)": "tasks",
    "taskclaim.outbox": "outbox",
    "taskclaim.outbox_id_seq": "outbox",
    "taskclaim.run": "runs",
    "taskclaim.schedule": "schedule",
    "taskclaim.enqueue_schedule_slot(schedule text, slot_seconds double precision, queue text, "
    "task_key text, window_seconds double precision, body_head text, body_tail text, "
    "slot timestamp with time zone DEFAULT NULL::timestamp with time zone)": "schedule",
}
FAMILIES = ("slug", "taskclaim", "queue", "tasks", "outbox", "runs", "schedule")
SCHEMAS = ["slug", "taskclaim"]

_OBJECTS = """
SELECT c.oid, n.nspname || '.' || c.relname, c.relkind
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = ANY(%s) AND c.relkind IN ('r', 'p', 'S', 'v', 'm')
UNION ALL
SELECT p.oid, n.nspname || '.' || p.proname || '(' || pg_get_function_arguments(p.oid) || ')', 'f'
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = ANY(%s)
ORDER BY 2
"""
_COLUMNS = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid), a.attidentity, col_description(a.attrelid, a.attnum)
FROM pg_attribute a
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""
# NOT NULL is a constraint row of its own from PostgreSQL 18: shown on its column.
_CONSTRAINTS = """
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
WHERE conrelid = %s AND contype <> 'n' ORDER BY conname
"""
_INDEXES = """
SELECT pg_get_indexdef(indexrelid) FROM pg_index i
WHERE indrelid = %s AND NOT EXISTS (SELECT FROM pg_constraint WHERE conindid = i.indexrelid)
ORDER BY indexrelid::regclass::text
"""
_TRIGGERS = "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = %s AND NOT tgisinternal"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _rows(cursor: Any, query: str, *params: Any) -> list[tuple[Any, ...]]:
    cursor.execute(query, list(params))
    return list(cursor.fetchall())


def _table(cursor: Any, oid: int, name: str) -> str:
    columns = []
    for column, type_, not_null, default, identity, _comment in _rows(cursor, _COLUMNS, oid):
        line = f"  {column} {type_}"
        if identity:
            line += " GENERATED " + ("ALWAYS" if identity == "a" else "BY DEFAULT") + " AS IDENTITY"
        if default is not None:
            line += f" DEFAULT {default}"
        columns.append(line + (" NOT NULL" if not_null else ""))
    lines = [f"CREATE TABLE {name} (", ",\n".join(columns), ");"]
    for constraint, definition in _rows(cursor, _CONSTRAINTS, oid):
        lines.append(f"ALTER TABLE {name} ADD CONSTRAINT {constraint} {definition};")
    lines += [f"{definition};" for (definition,) in _rows(cursor, _INDEXES, oid)]
    lines += [f"{definition};" for (definition,) in _rows(cursor, _TRIGGERS, oid)]
    cursor.execute("SELECT obj_description(%s, 'pg_class')", [oid])
    (comment,) = cursor.fetchone()
    if comment is not None:
        lines.append(f"COMMENT ON TABLE {name} IS {_quote(comment)};")
    for column, *_, column_comment in _rows(cursor, _COLUMNS, oid):
        if column_comment is not None:
            lines.append(f"COMMENT ON COLUMN {name}.{column} IS {_quote(column_comment)};")
    return "\n".join(lines)


def _function(cursor: Any, oid: int) -> str:
    cursor.execute(
        """SELECT pg_get_functiondef(%s), obj_description(%s, 'pg_proc'),
                  %s::regprocedure::text""",
        [oid, oid, oid],
    )
    definition, comment, signature = cursor.fetchone()
    text = definition.rstrip() + ";"
    if comment is not None:
        text += f"\nCOMMENT ON FUNCTION {signature} IS {_quote(comment)};"
    return text


def blocks(cursor: Any) -> dict[str, str]:
    """Each object of the app's schemas -> its normalised SQL, by name."""
    found: dict[str, str] = {}
    for (schema,) in _rows(
        cursor, "SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s)", SCHEMAS
    ):
        found[schema] = f"CREATE SCHEMA {schema};"
    for oid, name, kind in _rows(cursor, _OBJECTS, SCHEMAS, SCHEMAS):
        if kind == "f":
            found[name] = _function(cursor, oid)
        elif kind == "S":
            found[name] = f"CREATE SEQUENCE {name};"
        else:
            found[name] = _table(cursor, oid, name)
    return found


def _kinds(found: dict[str, str]) -> list[tuple[str, int]]:
    """Tables first, then sequences, then functions."""
    order = ("CREATE TABLE", "CREATE SEQUENCE", "CREATE OR REPLACE FUNCTION")
    return [
        (name, next((i for i, prefix in enumerate(order) if text.startswith(prefix)), len(order)))
        for name, text in found.items()
    ]


def listing(cursor: Any) -> str:
    """The reference file's text for the database of ``cursor``; raises
    ``KeyError`` naming an object :data:`OWNERS` lacks."""
    found = blocks(cursor)
    unowned = sorted(set(found) - set(SCHEMAS) - set(OWNERS))
    if unowned:
        raise KeyError(f"name the SQL family owning {', '.join(unowned)} in OWNERS")
    parts = [
        "-- The schema astral_taskclaim's migrations build, one block per object,\n"
        "-- grouped by the family of SQL files owning each (tests/tools/schema_reference.py).\n"
        "-- Generated from a freshly migrated PostgreSQL 17+ database by\n"
        "-- `make schema-reference`; do not edit by hand. Grants and owners follow\n"
        "-- settings, not migrations, and are left out.",
        *(found[schema] for schema in SCHEMAS if schema in found),
    ]
    kinds = dict(_kinds(found))
    for family in FAMILIES:
        names = sorted(
            (name for name in found if OWNERS.get(name) == family), key=lambda n: (kinds[n], n)
        )
        if names:
            parts.append(f"-- Owned by the {family}/ SQL files.")
            parts += [found[name] for name in names]
    return "\n\n".join(parts) + "\n"


def main() -> None:
    """Migrates a scratch test database, writes its listing to :data:`PATH`."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django
    from django.db import connection

    django.setup()
    from astral_taskclaim.db.connections import server_version

    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        if server_version(connection) < 170000:
            raise SystemExit("needs PostgreSQL 17 or newer (slug.slug differs on 14-16)")
        with connection.cursor() as cursor:
            PATH.write_text(listing(cursor), encoding="utf-8")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
    sys.stdout.write(f"wrote {PATH}\n")


if __name__ == "__main__":
    main()
