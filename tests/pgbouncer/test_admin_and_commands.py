"""The admin, ``taskclaim_status``, ``migrate`` and the system checks
through PgBouncer in transaction mode."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core import checks
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import reverse

from astral_taskclaim import claim_task
from astral_taskclaim.checks import check_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


def ids(messages: list[checks.CheckMessage]) -> set[str]:
    return {str(message.id) for message in messages}


def test_migrate_has_run_through_the_pooler_and_finds_nothing_to_do() -> None:
    # The session's test database was created and migrated through PgBouncer.
    out = io.StringIO()
    call_command("migrate", "astral_taskclaim", "--check", stdout=out)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM taskclaim.claim")


def test_the_admin_pages_load(admin_client: Client) -> None:
    claim_task("admin:1", window_seconds=60)
    for name in (
        "admin:index",
        "admin:astral_taskclaim_overview",
        "admin:astral_taskclaim_claim_changelist",
        "admin:astral_taskclaim_queuemessage_changelist",
    ):
        assert admin_client.get(reverse(name)).status_code == 200


def test_taskclaim_status_reports() -> None:
    claim_task("status:1", window_seconds=60)
    out = io.StringIO()
    call_command("taskclaim_status", "--json", stdout=out)
    assert json.loads(out.getvalue())


def test_the_check_names_the_pooler_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "astral_taskclaim.W040" in ids(check_server(databases=["default"]))
    monkeypatch.setitem(connection.settings_dict, "DISABLE_SERVER_SIDE_CURSORS", True)
    assert "astral_taskclaim.W040" not in ids(check_server(databases=["default"]))
    options: dict[str, Any] = {
        **connection.settings_dict.get("OPTIONS", {}),
        "assume_role": connection.settings_dict["USER"],
    }
    monkeypatch.setitem(connection.settings_dict, "OPTIONS", options)
    assert "astral_taskclaim.W041" in ids(check_server(databases=["default"]))
