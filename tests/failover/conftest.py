"""The failover suite: the session's ``default`` database is a
pg_auto_failover cluster (:mod:`.cluster`) reached by its multi-host URL
with ``target_session_attrs=read-write``, from the test database's creation
on. It changes the session's database, so it runs on its own, only when
named (``pytest tests/failover``, ``make failover``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.db import connections

from tests.failover.cluster import DATABASE, NODE_PORTS, Cluster


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """A monitor and two nodes, node1 primary."""
    running = Cluster()
    try:
        running.start()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(cluster: Cluster) -> None:
    """``default``: both nodes, the read-write one chosen at each connection."""
    connections.close_all()
    settings.DATABASES["default"].update(
        HOST=",".join("127.0.0.1" for _ in NODE_PORTS),
        PORT=",".join(str(port) for port in NODE_PORTS),
        NAME=DATABASE,
        USER=cluster.user,
        PASSWORD="",
        OPTIONS={"target_session_attrs": "read-write", "connect_timeout": 5},
    )
