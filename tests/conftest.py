"""Fixtures shared by the whole suite: the server version, an empty claim
table, and the local Cloudflare Queues and moto SQS servers."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from astral_taskclaim.db import connections as db_connections
from astral_taskclaim.db import cron
from astral_taskclaim.tasks_backend import retention
from tests.queues.cloudflare_server import CloudflareQueuesServer
from tests.queues.servers import CloudflareOutbox, MotoSQS, running_cloudflare, running_moto

#: The fast tier (``make test-fast``, ``pytest -m fast``): modules that
#: run in seconds, on the memory queue or without the database. Their tests
#: run in the full suite too.
FAST_MODULES = {
    "tests/admin/test_chart.py",
    "tests/queues/test_arguments.py",
    "tests/queues/test_base.py",
    "tests/queues/test_memory.py",
    "tests/core/test_envelope.py",
    "tests/test_imports.py",
    "tests/test_init.py",
    "tests/core/test_logtext.py",
    "tests/core/test_redaction.py",
    "tests/consumer/test_retry.py",
    "tests/core/test_validation.py",
}


#: Suites that change the session's database (``tests/pgbouncer`` runs it
#: through PgBouncer, ``tests/failover`` on a pg_auto_failover cluster):
#: collected only when named on the command line.
OWN_SESSION_SUITES = ("tests/pgbouncer", "tests/failover")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    relative = collection_path.relative_to(config.rootpath).as_posix()
    for suite in OWN_SESSION_SUITES:
        if relative == suite or relative.startswith(suite + "/"):
            named = [Path(arg.split("::")[0]).resolve() for arg in config.args]
            root = config.rootpath / suite
            return not any(path == root or root in path.parents for path in named)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath
    for item in items:
        if item.path.relative_to(root).as_posix() in FAST_MODULES:
            item.add_marker(pytest.mark.fast)


@pytest.fixture
def server_version() -> int:
    """The test server's ``server_version_num``."""
    return db_connections.server_version(connection)


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


@pytest.fixture
def empty_claims() -> Iterator[None]:
    """An empty claim table before and after the test (transactional tests
    do not flush the unmanaged table)."""
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE taskclaim.claim, taskclaim.follow_up")
    yield
    if not connection.in_atomic_block:
        connection.close_if_unusable_or_obsolete()  # a test may have broken it
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE taskclaim.claim, taskclaim.follow_up")


@pytest.fixture(scope="session")
def cloudflare_server() -> CloudflareQueuesServer:
    """The local Cloudflare Queues API."""
    return running_cloudflare()


@pytest.fixture
def cloudflare_options(cloudflare_server: CloudflareQueuesServer) -> Callable[..., dict[str, Any]]:
    """Makes a queue on the local server; ``OPTIONS`` of a ``CloudflareQueue`` on it."""

    def make(*, queue_settings: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        queue_id = cloudflare_server.create_queue(**(queue_settings or {}))
        return {
            "account_id": cloudflare_server.account_id,
            "queue_id": queue_id,
            "api_token": cloudflare_server.token,
            "base_url": cloudflare_server.base_url,
            **extra,
        }

    return make


@pytest.fixture(scope="session")
def moto_sqs() -> MotoSQS:
    """moto's SQS over real HTTP, with a key pair that may use it."""
    return running_moto()


@pytest.fixture
def cloudflare_outbox(
    cloudflare_options: Callable[..., dict[str, Any]],
) -> Iterator[CloudflareOutbox]:
    """A new Cloudflare queue with ``outbox`` on (and no request retries, so
    each relay attempt is one request), in ``TASKCLAIM_QUEUES``; its outbox
    rows are deleted afterwards."""
    options = cloudflare_options(outbox=True, request_retries=0)
    outbox = CloudflareOutbox(f"outbox-{uuid.uuid4().hex[:12]}", options["queue_id"], options)
    with override_settings(TASKCLAIM_QUEUES=outbox.config()):
        yield outbox
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.outbox WHERE queue = %s", [outbox.alias])
