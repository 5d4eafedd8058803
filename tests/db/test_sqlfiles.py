"""Includes in the packaged SQL files: one statement restated by another
with a few words changed, expanded once when the file is read."""

from __future__ import annotations

import pytest

from astral_taskclaim.db import sqlfiles


def _body(text: str) -> list[str]:
    return [
        line for line in text.split("\n") if line.strip() and not line.lstrip().startswith("--")
    ]


def test_an_include_is_the_named_statement_indented_and_changed() -> None:
    text = (
        "WITH x AS (\n"
        "  -- include: taskclaim/claim.sql\n"
        "  --   replacing: gen_random_uuid()\n"
        "  --   with: %(token)s::uuid\n"
        ")\n"
        "SELECT 1\n"
    )
    expanded = sqlfiles._expand(text, where="test")
    claim = _body(sqlfiles.read("taskclaim/claim.sql"))
    assert _body(expanded) == [
        "WITH x AS (",
        *("  " + line.replace("gen_random_uuid()", "%(token)s::uuid") for line in claim),
        ")",
        "SELECT 1",
    ]
    assert expanded.endswith("SELECT 1\n")


def test_the_outbox_statements_are_the_queue_statements_on_the_outbox_table() -> None:
    for queue, outbox in (
        ("taskclaim/enqueue.sql", "outbox/enqueue.sql"),
        ("taskclaim/bulk_enqueue.sql", "outbox/enqueue_many.sql"),
        ("taskclaim/trail_many.sql", "outbox/trail_many.sql"),
    ):
        assert _body(sqlfiles.read(outbox)) == [
            line.replace("taskclaim.message", "taskclaim.outbox").replace(
                "body, visible_at)", "body, available_at)"
            )
            for line in _body(sqlfiles.read(queue))
        ]
        assert "-- include" not in sqlfiles.read(outbox)


def test_a_replaced_text_must_occur_exactly_once() -> None:
    missing = "-- include: taskclaim/claim.sql\n--   replacing: no such text\n--   with: x\n"
    with pytest.raises(
        ValueError, match=r"mine including taskclaim/claim\.sql: 'no such text' occurs 0 times"
    ):
        sqlfiles._expand(missing, where="mine")
    twice = "-- include: taskclaim/claim.sql\n--   replacing: %(key)s::text\n--   with: x\n"
    with pytest.raises(ValueError, match=r"occurs 2 times"):
        sqlfiles._expand(twice, where="mine")


def test_an_include_of_a_file_not_shipped_fails() -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.sql"):
        sqlfiles._expand("-- include: taskclaim/nope.sql\n", where="mine")


def test_the_source_keeps_the_include_marker() -> None:
    assert "-- include: taskclaim/enqueue.sql" in sqlfiles.source("outbox/enqueue.sql")
