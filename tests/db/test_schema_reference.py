"""The schema a fresh ``migrate`` builds equals the committed reference,
``astral_taskclaim/db/sql/schema_reference.sql`` (tests/tools/schema_reference.py)."""

from __future__ import annotations

import difflib

import pytest
from django.db import connection

from tests.tools.schema_reference import PATH, listing

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
