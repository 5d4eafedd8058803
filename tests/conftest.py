from __future__ import annotations

import pytest
from django.db import connection


@pytest.fixture
def server_version() -> int:
    """The test server's ``server_version_num``."""
    connection.ensure_connection()
    return int(connection.pg_version)
