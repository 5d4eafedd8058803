"""The system checks, one test per id."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from contextlib import contextmanager
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core import checks as django_checks
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.test import override_settings

from astral_taskclaim import checks
from astral_taskclaim.core import checks as core_checks
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.core.envelope import message_body
from astral_taskclaim.db import cron
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks import registry
from astral_taskclaim.worker import checks as worker_checks

pytestmark = pytest.mark.django_db


def ids(messages: list[object]) -> list[str]:
    return [message.id for message in messages]  # type: ignore[attr-defined]


def test_clean_configuration_passes() -> None:
    assert checks.check_settings() == []
    assert checks.check_queues() == []
    assert core_checks.check_setting_names() == []
    assert core_checks.check_queue_keys() == []


def test_e001_database_is_not_postgresql() -> None:
    with override_settings(TASKCLAIM_DATABASE="sqlite"):
        messages = checks.check_settings()
    assert ids(messages) == ["astral_taskclaim.E001"]
    assert "sqlite" in messages[0].msg


@pytest.mark.parametrize("version", [90600, 130014])
def test_e002_server_older_than_14(version: int) -> None:
    assert ids(checks._version_messages(version)) == ["astral_taskclaim.E002"]


@pytest.mark.parametrize(
    ("version", "expected"), [(140000, 1), (160009, 1), (170000, 0), (180001, 0)]
)
def test_w003_slug_fallback_below_17(version: int, expected: int) -> None:
    assert ids(checks._version_messages(version)) == ["astral_taskclaim.W003"] * expected


def test_w003_follows_the_real_server(server_version: int) -> None:
    messages = checks.check_server(databases=["default"])
    assert ("astral_taskclaim.W003" in ids(messages)) == (server_version < 170000)


def test_w004_when_pg_cron_is_not_loaded_and_the_workers_upkeep_is_off() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('cron.database_name', true)")
        loaded = cursor.fetchone()[0] is not None
    with override_settings(TASKCLAIM_UPKEEP=False):
        messages = [m for m in checks.check_server(databases=["default"]) if m.id.endswith("W004")]
    assert len(messages) == (0 if loaded else 1)
    if messages:
        assert "taskclaim_delete_expired" in (messages[0].hint or "")
    # On (the default), the workers run the cleanup as a built-in schedule.
    with override_settings(TASKCLAIM_UPKEEP=True):
        found = [m for m in checks.check_server(databases=["default"]) if m.id.endswith("W004")]
    assert not found


def test_e005_configured_role_missing() -> None:
    with override_settings(TASKCLAIM_SERVICE_ROLE="taskclaim_nobody"):
        messages = checks.check_server(databases=["default"])
    errors = [m for m in messages if m.id == "astral_taskclaim.E005"]
    assert len(errors) == 1
    assert "taskclaim_nobody" in errors[0].msg
    assert "CREATE ROLE" in errors[0].msg


@pytest.mark.parametrize(
    "overrides",
    [
        {"TASKCLAIM_DATABASE": "missing"},
        {"TASKCLAIM_DELAY_SCALE": 2},
        {"TASKCLAIM_DELAY_SCALE": True},
        {"TASKCLAIM_ADMIN_ROLE": "bad role;"},
        {"TASKCLAIM_QUEUES": ["default"]},
        {"TASKCLAIM_ASYNC_POOL": 0},
        {"TASKCLAIM_ASYNC_POOL": "10"},
        {"TASKCLAIM_TASK_RESULTS_RETENTION": "7d"},
        {"TASKCLAIM_TASK_RESULTS_RETENTION": -1},
    ],
)
def test_e006_malformed_setting(overrides: dict[str, object]) -> None:
    with override_settings(**overrides):
        messages = checks.check_settings()
    assert ids(messages) == ["astral_taskclaim.E006"]
    assert next(iter(overrides)) in messages[0].msg


@pytest.mark.parametrize(
    "config",
    [
        {"BACKEND": "no.such.Backend"},
        {"BACKEND": "astral_taskclaim.core.conf.AppSettings"},
        {"OPTIONS": {}},
        {"BACKEND": "astral_taskclaim.queues.base.BaseQueue", "OPTIONS": []},
    ],
)
def test_e010_queue_cannot_be_loaded(config: dict[str, object]) -> None:
    with override_settings(TASKCLAIM_QUEUES={"broken": config}):
        messages = checks.check_queues()
    assert ids(messages) == ["astral_taskclaim.E010"]
    assert "broken" in messages[0].msg


def test_database_checks_run_with_manage_py_check() -> None:
    out = StringIO()
    with (
        override_settings(TASKCLAIM_SERVICE_ROLE="taskclaim_nobody"),
        pytest.raises(SystemCheckError, match=r"astral_taskclaim\.E005"),
    ):
        call_command("check", "--database", "default", stdout=out, stderr=out)


def test_e031_claimed_task_on_a_queue_missing_from_the_setting() -> None:
    registry.task(queue="reports", name="tests.reports")(print)
    try:
        # Only this task's: other tests may leave tasks registered.
        messages = [m for m in checks.check_task_queues() if m.obj == "tests.reports"]
    finally:
        registry.unregister("reports")
    assert ids(messages) == ["astral_taskclaim.E031"]
    assert messages[0].msg == (
        "claimed task tests.reports uses queue 'reports', which TASKCLAIM_QUEUES does not "
        "define (it has: default)"
    )
    assert messages[0].hint == (
        "Add 'reports' to TASKCLAIM_QUEUES, or pass one of its aliases as @claimed_task(queue=...)."
    )


def test_e031_is_a_registered_check() -> None:
    assert checks.check_task_queues in django_checks.registry.registry.get_checks()


def test_w003_only_for_a_project_using_slug_slug() -> None:
    assert checks._uses_slug_function()  # tests.testapp has a DbSlugField
    assert ids(checks._version_messages(150000, uses_slug=False)) == []
    message = checks._version_messages(150000, uses_slug=True)[0]
    assert "matters only if slugs made here must equal slugs made on PostgreSQL 17+" in message.msg
    assert "SILENCED_SYSTEM_CHECKS" in (message.hint or "")


def test_w003_not_raised_without_a_slug_field(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.apps import apps

    models = [m for m in apps.get_models() if m._meta.app_label != "testapp"]
    monkeypatch.setattr(apps, "get_models", lambda: models)
    assert not checks._uses_slug_function()


@pytest.mark.django_db(transaction=True)
def test_w032_when_no_pg_cron_job_cleans_the_database_and_schedule_fixes_it() -> None:
    if cron.has_cleanup_job(connection) is None:
        pytest.skip("needs pg_cron")
    database = connection.settings_dict["NAME"]
    assert not [m for m in checks.check_server(databases=["default"]) if m.id.endswith("W032")]
    with connection.schema_editor() as editor:
        cron.unschedule(editor)
    try:
        found = [m for m in checks.check_server(databases=["default"]) if m.id.endswith("W032")]
        assert len(found) == 1
        assert f"no taskclaim job deletes expired claims in database {database}" in found[0].msg
        assert "taskclaim_delete_expired --schedule" in (found[0].hint or "")
    finally:
        out = StringIO()
        call_command("taskclaim_delete_expired", "--schedule", stdout=out)
    assert out.getvalue() == f"pg_cron deletes expired claims in {database}.\n"
    assert cron.has_cleanup_job(connection) is True


def test_w034_a_queue_holding_messages_no_registered_task_consumes() -> None:
    backend = {"BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue"}
    with override_settings(TASKCLAIM_QUEUES={"default": backend, "jobs": backend}):
        assert worker_checks.check_unconsumed_queues(databases=["default"]) == []  # empty: no noise
        PostgresQueue("jobs").send(message_body("k", "t", 60, {"id": 1}))
        [warning] = worker_checks.check_unconsumed_queues(databases=["default"])
        assert warning.id == "astral_taskclaim.W036"
        assert warning.msg.startswith("queue 'jobs' holds 1 message, but no claimed task")
        assert "tasks.py" in warning.hint
        assert worker_checks.check_unconsumed_queues() == []  # only with --database
        registry.task(queue="jobs", name="tests.jobs")(print)
        try:
            assert worker_checks.check_unconsumed_queues(databases=["default"]) == []
        finally:
            registry.unregister("jobs")


README = Path(__file__).resolve().parents[1] / "README.md"
SHARED = {"astral_taskclaim.W034", "astral_taskclaim.W035"}


def documented_queues(marker: str) -> dict[str, Any]:
    """The ``TASKCLAIM_QUEUES`` of the README's first Python block after ``marker``."""
    text = README.read_text()
    block = text[text.index(marker) :].split("```python\n", 1)[1].split("```", 1)[0]
    [assign] = [node for node in ast.parse(block).body if isinstance(node, ast.Assign)]
    assert ast.unparse(assign.targets[0]) == "TASKCLAIM_QUEUES"
    return ast.literal_eval(assign.value)


@contextmanager
def tasks_on(*queues: str, default: bool = False) -> Iterator[list[str]]:
    """Two claimed tasks on each of ``queues``, the first ``default``."""
    names = [(queue, f"tests.{queue}_{n}") for queue in queues for n in ("one", "two")]
    try:
        for queue, name in names:
            registry.task(queue=queue, name=name, default=default and name.endswith("one"))(print)
        yield [name for _, name in names]
    finally:
        for queue, name in names:
            registry.unregister(queue, name)


def test_w034_w035_not_for_the_readmes_layout_in_a_project_without_typescript() -> None:
    configured = documented_queues("**Several claimed tasks may share a queue**")
    assert len(configured) == 2
    # A project of claimed tasks only: no Django Tasks backend holds "default".
    with override_settings(TASKCLAIM_QUEUES=configured, TASKS={}), tasks_on(*configured):
        assert worker_checks.check_shared_queues() == []


@pytest.mark.parametrize(
    "backend",
    [
        "astral_taskclaim.queues.cloudflare.CloudflareQueue",
        "astral_taskclaim.queues.sqs.SQSQueue",
    ],
)
def test_w034_w035_for_a_queue_a_typescript_worker_can_reach(backend: str) -> None:
    with override_settings(TASKCLAIM_QUEUES={"default": POSTGRES, "edge": {"BACKEND": backend}}):
        with tasks_on("edge"):
            registry.unregister("edge", "tests.edge_two")
            assert worker_checks.check_shared_queues() == []  # one task: the four fields only
            registry.task(queue="edge", name="tests.edge_two")(print)
            found = {m.id: m for m in worker_checks.check_shared_queues()}
        assert set(found) == SHARED
        w034, w035 = found["astral_taskclaim.W034"], found["astral_taskclaim.W035"]
        assert "queue 'edge' carries 2 claimed tasks (tests.edge_one, tests.edge_two)" in w034.msg
        assert "consume 'edge' with Python workers only" in w034.hint
        assert "astral_taskclaim.W034" in w034.hint
        for remedy in (
            "Declare one of tests.edge_one, tests.edge_two @claimed_task(default=True)",
            '"taskName"',
            "only this project sends to 'edge'",
            "astral_taskclaim.W035",
        ):
            assert remedy in w035.hint
        with tasks_on("edge", default=True):
            assert ids(worker_checks.check_shared_queues()) == ["astral_taskclaim.W034"]
    assert worker_checks.check_shared_queues in django_checks.registry.registry.get_checks()


POSTGRES = {"BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue"}


@pytest.mark.parametrize(
    ("name", "guess"),
    [
        ("TASKCLAIM_UPKEP", "; did you mean TASKCLAIM_UPKEEP?"),
        ("TASKCLAIM_QUEUE", "; did you mean TASKCLAIM_QUEUES?"),
        ("TASKCLAIM_Delay_Scale", "; did you mean TASKCLAIM_DELAY_SCALE?"),
        ("TASKCLAIM_FROBNICATE", ""),
    ],
)
def test_w008_a_taskclaim_setting_the_app_does_not_read(name: str, guess: str) -> None:
    with override_settings(**{name: True}):
        messages = core_checks.check_setting_names()
    assert ids(messages) == ["astral_taskclaim.W008"]
    assert messages[0].msg == (
        f"setting {name} is not one astral_taskclaim reads, so it has no effect{guess}"
    )
    assert messages[0].obj == name
    assert "TASKCLAIM_UPKEEP" in (messages[0].hint or "")
    assert "silence astral_taskclaim.W008" in (messages[0].hint or "")


def test_w008_knows_every_setting_of_app_settings_and_only_those() -> None:
    known = core_checks._known_settings()
    assert "TASKCLAIM_UPKEEP" in known
    assert "TASKCLAIM_QUEUES" in known
    # Each name is the one its property reads: a value no setting takes
    # makes the property raise, naming that setting.
    for name in known:
        with override_settings(**{name: object()}):
            attribute = name.removeprefix("TASKCLAIM_")
            with pytest.raises(ImproperlyConfigured, match=name):
                getattr(app_settings, attribute)
            assert core_checks.check_setting_names() == []
    # Not a setting's prefix alone, nor other apps' settings.
    with override_settings(TASKCLAIMS=1, OTHER_TASKCLAIM_UPKEP=1):
        assert core_checks.check_setting_names() == []


@pytest.mark.parametrize(
    ("key", "guess"),
    [
        ("HISTROY", "; did you mean 'HISTORY'?"),
        ("backend", "; did you mean 'BACKEND'?"),
        ("Options", "; did you mean 'OPTIONS'?"),
        ("visibility_timeout", ""),
        (7, ""),
    ],
)
def test_e016_an_unknown_key_of_a_queue_entry(key: object, guess: str) -> None:
    config: dict[object, object] = {**POSTGRES, key: "none"}
    with override_settings(TASKCLAIM_QUEUES={"default": POSTGRES, "jobs": config}):
        messages = core_checks.check_queue_keys()
    assert ids(messages) == ["astral_taskclaim.E016"]
    assert messages[0].msg == (
        f"TASKCLAIM_QUEUES['jobs'] has unknown key {key!r}; allowed: BACKEND, OPTIONS, "
        f"HISTORY, TIME_LIMIT{guess}"
    )
    assert messages[0].obj == "jobs"
    assert "OPTIONS" in (messages[0].hint or "")


def test_e016_not_for_the_keys_a_queue_entry_takes_nor_for_a_bad_option() -> None:
    configured = {
        "default": {**POSTGRES, "OPTIONS": {"visibilty_timeout": 5}, "HISTORY": "none"},
        "broken": ["not", "a", "dict"],  # E010 says so
    }
    with override_settings(TASKCLAIM_QUEUES=configured):
        assert core_checks.check_queue_keys() == []
        assert "astral_taskclaim.E014" in ids(checks.check_queues())
    with override_settings(TASKCLAIM_QUEUES=["default"]):  # E006 says so
        assert core_checks.check_queue_keys() == []


def test_w008_and_e016_are_registered_checks() -> None:
    registered = django_checks.registry.registry.get_checks()
    assert core_checks.check_setting_names in registered
    assert core_checks.check_queue_keys in registered
