"""Before ``manage.py migrate``: every way in says to run it."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.core import checks
from django.core.management import call_command
from django.core.management.base import CommandError
from django.core.management.commands.migrate import Command as Migrate
from django.db import ProgrammingError, connection
from django.test import override_settings

from astral_taskclaim import claim_task, enqueue_claimed
from astral_taskclaim.core.not_migrated import NotMigratedError, ensure_migrated
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks import ClaimedTask, registry
from astral_taskclaim.worker.loop import Worker

pytestmark = pytest.mark.django_db(transaction=True)

ADVICE = "run `manage.py migrate` first"


@pytest.fixture
def unmigrated() -> Iterator[None]:
    """The app's schema out of sight, as before the first migrate; back afterwards."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER SCHEMA taskclaim RENAME TO taskclaim_hidden")
    connection.close()  # prepared statements would still find the tables
    try:
        yield
    finally:
        connection.close()
        with connection.cursor() as cursor:
            cursor.execute("ALTER SCHEMA taskclaim_hidden RENAME TO taskclaim")


@pytest.fixture
def jobs() -> Iterator[ClaimedTask[Any]]:
    config = {"jobs": {"BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue"}}
    with override_settings(TASKCLAIM_QUEUES=config):
        task = registry.task(queue="jobs", name="tests.unmigrated")(print)
        yield task
        registry.unregister("jobs")


@pytest.mark.usefixtures("unmigrated")
def test_enqueue_says_run_migrate() -> None:
    with pytest.raises(NotMigratedError) as caught:
        enqueue_claimed(PostgresQueue("default"), "k", 1, window_seconds=60)
    message = str(caught.value)
    assert message == (
        'astral_taskclaim is not migrated (relation "taskclaim.claim" does not exist): '
        "run `manage.py migrate` first"
    )
    assert isinstance(caught.value, ProgrammingError)  # still a database error


@pytest.mark.usefixtures("unmigrated")
def test_without_the_app_in_installed_apps_the_error_says_to_add_it() -> None:
    installed = [app for app in settings.INSTALLED_APPS if app != "astral_taskclaim"]
    with override_settings(INSTALLED_APPS=installed), pytest.raises(NotMigratedError) as caught:
        enqueue_claimed(PostgresQueue("default"), "k", 1, window_seconds=60)
    assert str(caught.value).endswith(
        ': add "astral_taskclaim" to INSTALLED_APPS, then run `manage.py migrate` first'
    )
    with override_settings(INSTALLED_APPS=installed), pytest.raises(NotMigratedError) as caught:
        ensure_migrated("default")
    assert 'add "astral_taskclaim" to INSTALLED_APPS' in str(caught.value)


@pytest.mark.usefixtures("unmigrated")
def test_claim_task_says_run_migrate() -> None:
    with pytest.raises(NotMigratedError, match=ADVICE):
        claim_task("k", window_seconds=60)


@pytest.mark.usefixtures("unmigrated")
def test_a_queue_receive_says_run_migrate() -> None:
    with pytest.raises(NotMigratedError, match=r"taskclaim\.message.*" + ADVICE):
        PostgresQueue("default").receive(max_messages=1)


@pytest.mark.usefixtures("unmigrated")
def test_ensure_migrated_names_the_database_and_the_tables() -> None:
    with pytest.raises(NotMigratedError) as caught:
        ensure_migrated("default")
    assert str(caught.value) == (
        "astral_taskclaim is not migrated in database 'default' (taskclaim.claim, "
        "taskclaim.message missing): run `manage.py migrate` first"
    )


@pytest.mark.usefixtures("unmigrated")
def test_a_worker_stops_instead_of_reconnecting_forever(jobs: ClaimedTask[Any]) -> None:
    worker = Worker("jobs", wait=0)  # not burst: it would otherwise never return
    with pytest.raises(NotMigratedError, match=ADVICE):
        worker.run()
    assert worker.stats.database_errors == 0


@pytest.mark.usefixtures("unmigrated", "jobs")
def test_consume_claimed_exits_at_start_with_the_advice() -> None:
    with pytest.raises(CommandError) as caught:
        call_command("consume_claimed", "jobs", stdout=io.StringIO(), stderr=io.StringIO())
    assert str(caught.value) == (
        "astral_taskclaim is not migrated in database 'default' (taskclaim.claim, "
        "taskclaim.message missing): run `manage.py migrate` first"
    )


@pytest.mark.usefixtures("unmigrated", "jobs")
@pytest.mark.parametrize(
    "args",
    [["k", "--task", "1", "--window", "60"], ["--file", "-", "--window", "60"]],
    ids=["one", "file"],
)
def test_enqueue_claimed_says_run_migrate_in_one_line(
    args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b'{"key": "k", "task": 1}\n')))
    with pytest.raises(CommandError) as caught:
        call_command("enqueue_claimed", "jobs", *args, stdout=io.StringIO(), stderr=io.StringIO())
    assert str(caught.value) == (
        'astral_taskclaim is not migrated (relation "taskclaim.claim" does not exist): '
        "run `manage.py migrate` first"
    )


@pytest.mark.usefixtures("unmigrated")
def test_taskclaim_status_says_run_migrate() -> None:
    with pytest.raises(CommandError, match=ADVICE):
        call_command("taskclaim_status", stdout=io.StringIO())


@pytest.mark.usefixtures("unmigrated")
def test_check_database_warns_w030() -> None:
    found = [m for m in checks.run_checks(databases=["default"]) if m.id.endswith("W030")]
    assert len(found) == 1
    assert found[0].msg == (
        "astral_taskclaim is not migrated in database 'default' (taskclaim.claim, "
        "taskclaim.message missing): claims, enqueues and workers fail until it is."
    )
    assert found[0].hint == "Run `manage.py migrate`."


@pytest.mark.usefixtures("unmigrated")
def test_migrate_itself_does_not_print_w030() -> None:
    # migrate runs the database checks before it migrates (BaseCommand.check
    # on its own instance): W030 there would tell it to run itself.
    out, err = io.StringIO(), io.StringIO()
    Migrate(stdout=out, stderr=err).check(databases=["default"], tags=[checks.Tags.database])
    assert "W030" not in out.getvalue() + err.getvalue()
    assert [m.id for m in checks.run_checks(databases=["default"]) if m.id.endswith("W030")] == [
        "astral_taskclaim.W030"
    ]


def test_no_w030_once_migrated() -> None:
    assert not [m for m in checks.run_checks(databases=["default"]) if m.id.endswith("W030")]
