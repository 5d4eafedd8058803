"""The schema a fresh ``migrate`` builds equals the committed reference,
``astral_taskclaim/db/sql/schema_reference.sql`` (tests/tools/schema_reference.py)."""

from __future__ import annotations

import difflib
import re

import pytest
from django.db import connection

from astral_taskclaim.db import sqlfiles
from tests.tools.schema_reference import OWNERS, PATH, listing

pytestmark = pytest.mark.django_db

SLUG = "CREATE OR REPLACE FUNCTION slug.slug(name text)"


def _without_slug_function(text: str) -> str:
    return "\n\n".join(block for block in text.split("\n\n") if not block.startswith(SLUG))


def test_a_fresh_migrate_builds_the_reference_schema(server_version: int) -> None:
    with connection.cursor() as cursor:
        built = listing(cursor)
    reference = PATH.read_text(encoding="utf-8")
    if server_version < 170000:
        # 14-16 get the tabulated slug.slug (tests/db/sql/test_slug.py).
        assert SLUG in built
        built, reference = _without_slug_function(built), _without_slug_function(reference)
    diff = "\n".join(
        difflib.unified_diff(
            reference.splitlines(), built.splitlines(), "reference", "migrated", lineterm=""
        )
    )
    assert diff == "", f"regenerate with `make schema-reference` if intended:\n{diff}"


#: Statements that write a table another family owns, with the reason.
CROSSING = {
    # The PostgreSQL queue's enqueue: claim and message in one statement,
    # kept with the claim statements it includes.
    "taskclaim/enqueue.sql": {"message"},
    "taskclaim/bulk_enqueue.sql": {"message"},
    "taskclaim/trail_many.sql": {"message"},
    # The admin's "delete expired claims", as the service role may run it.
    "admin/delete_expired.sql": {"claim"},
    # The admin's "cancel": the runs and their keys' claims in one statement,
    # so a cancelled coalescing run never keeps its key claimed.
    "admin/cancel_runs.sql": {"claim", "task_result"},
    # A freed concurrency slot wakes its group's oldest waiting message on
    # the PostgreSQL queue in the same statement, so no wake-up is lost.
    "taskclaim/slot_release.sql": {"message"},
    # A trailing run's kept claim ends and its key's waiting follow-up is
    # made due in the same statement, so the follow-up never waits for nothing.
    "taskclaim/end_run.sql": {"message"},
}
_WRITE = re.compile(r"(?:INSERT INTO|UPDATE|DELETE FROM)\s+taskclaim\.(\w+)")


def test_each_table_is_written_by_its_owners_sql_or_through_an_include_of_it() -> None:
    # What an include brings in is the included family's own statement.
    owners = {name.split(".")[1]: family for name, family in OWNERS.items() if "(" not in name}
    crossing: dict[str, set[str]] = {}
    for path in sqlfiles._all_paths():
        lines = sqlfiles.source(path).splitlines()
        own = "\n".join(line for line in lines if not line.lstrip().startswith("--"))
        foreign = {table for table in _WRITE.findall(own) if owners[table] != path.split("/")[0]}
        if foreign:
            crossing[path] = foreign
    assert crossing == CROSSING
