"""What ``synchronous_commit`` each transaction writing a table had when it
committed, read by a deferred trigger (it fires at commit)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import connection

_SETUP = """
CREATE TABLE public.commit_settings (
  id serial PRIMARY KEY, tbl text NOT NULL, op text NOT NULL, setting text NOT NULL
);
CREATE FUNCTION public.note_commit_setting() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.commit_settings (tbl, op, setting)
  VALUES (TG_TABLE_NAME, TG_OP, current_setting('synchronous_commit'));
  RETURN NULL;
END;
$$;
"""
_TEARDOWN = """
DROP TABLE public.commit_settings;
DROP FUNCTION public.note_commit_setting() CASCADE;
"""


@contextmanager
def commit_settings(*tables: str) -> Iterator[Callable[[], list[tuple[str, str, str]]]]:
    """Inside the block, the ``(table, operation, synchronous_commit)`` of
    every row written to ``tables`` (``taskclaim.message``, ...) as its
    transaction committed, in order; the triggers are dropped afterwards."""
    with connection.cursor() as cursor:
        cursor.execute(_SETUP)
        for table in tables:
            cursor.execute(
                f"CREATE CONSTRAINT TRIGGER note_commit_setting AFTER INSERT OR UPDATE OR DELETE "
                f"ON {table} DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
                "EXECUTE FUNCTION public.note_commit_setting()"
            )

    def noted() -> list[tuple[str, str, str]]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT tbl, op, setting FROM public.commit_settings ORDER BY id")
            return [(str(t), str(o), str(s)) for t, o, s in cursor.fetchall()]

    try:
        yield noted
    finally:
        with connection.cursor() as cursor:
            cursor.execute(_TEARDOWN)
