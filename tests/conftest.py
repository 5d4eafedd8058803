from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection

from astral_taskclaim import cron
from astral_taskclaim.tasks_backend import retention


@pytest.fixture
def server_version() -> int:
    """The test server's ``server_version_num``."""
    connection.ensure_connection()
    return int(connection.pg_version)


@pytest.fixture(scope="session", autouse=True)
def _unschedule_cron_job(
    django_db_setup: None, django_db_blocker: pytest.FixtureRequest
) -> Iterator[None]:
    """Removes the test database's pg_cron job before the database is dropped,
    so pg_cron is not left with a job for a database that no longer exists."""
    yield
    with django_db_blocker.unblock(), connection.schema_editor() as editor:  # type: ignore[attr-defined]
        cron.unschedule(editor)
        retention.unschedule_job(editor.connection)
