"""The PgBouncer suite: the whole session's ``default`` database goes
through PgBouncer in transaction mode (:mod:`.server`), from the test
database's creation and ``migrate`` on, with no pooler-specific setting.

It changes the session's database, so it runs on its own, only when named
(``pytest tests/pgbouncer``, ``make pgbouncer``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.db import connection, connections

from tests.pgbouncer.server import PgBouncer


@pytest.fixture(scope="session")
def pgbouncer() -> Iterator[PgBouncer]:
    """PgBouncer in front of the server the settings name."""
    server = settings.DATABASES["default"]
    bouncer = PgBouncer(
        host=server.get("HOST") or "/var/run/postgresql",
        port=int(server.get("PORT") or 5432),
        user=server.get("USER") or "postgres",
        password=server.get("PASSWORD") or "",
    )
    bouncer.start()
    yield bouncer
    bouncer.stop()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(pgbouncer: PgBouncer) -> None:
    """``default`` reached through PgBouncer, before the test database is made."""
    connections.close_all()
    settings.DATABASES["default"].update(HOST="127.0.0.1", PORT=str(pgbouncer.listen_port))


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, pgbouncer: PgBouncer) -> Iterator[None]:
    """The test database, whose server connections PgBouncer drops before
    Django drops the database (it refuses while they are open)."""
    yield
    connections.close_all()
    pgbouncer.close_server_connections(connection.settings_dict["NAME"])
