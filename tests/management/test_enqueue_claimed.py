"""manage.py enqueue_claimed: one task, or JSON lines with a progress bar."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import pytest
from django.core.management import call_command, get_commands, load_command_class
from django.core.management.base import CommandError
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks import registry
from tests.claimkit import claims
from tests.queues.postgres.pgqueue import bodies

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


def enqueue(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("enqueue_claimed", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_prints_the_token_and_sends_the_envelope(jobs: PostgresQueue) -> None:
    out, _ = enqueue("jobs", "room:1", "--task", '{"id": 1}', "--window", "300")
    token = out.strip()
    assert str(uuid.UUID(token)) == token
    assert bodies(jobs) == [
        f'{{"key":"room:1","claim":"{token}","windowSeconds":300,"task":{{"id":1}}}}'
    ]
    assert claims()["room:1"][0] == token


def test_an_already_claimed_key_is_an_outcome_that_exits_3(
    jobs: PostgresQueue, capsys: pytest.CaptureFixture[str]
) -> None:
    enqueue("jobs", "room:1", "--task", "{}", "--window", "300")
    out, err = enqueue("jobs", "room:1", "--task", "{}", "--window", "300")
    assert (out, err) == ("", "room:1 is already claimed; nothing sent\n")
    assert len(bodies(jobs)) == 1
    # As a process: no CommandError, exit status 3 so scripts can tell.
    command = load_command_class(get_commands()["enqueue_claimed"], "enqueue_claimed")
    argv = ["manage.py", "enqueue_claimed", "jobs", "room:1", "--task", "{}", "--window", "1"]
    argv.append("--skip-checks")  # the model checks would query the sqlite alias
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        command.run_from_argv(argv)
    assert exited.value.code == 3
    assert capsys.readouterr() == ("", "room:1 is already claimed; nothing sent\n")


def test_a_sent_task_exits_0_from_the_command_line(jobs: PostgresQueue) -> None:
    command = load_command_class(get_commands()["enqueue_claimed"], "enqueue_claimed")
    argv = ["manage.py", "enqueue_claimed", "jobs", "room:2", "--task", "{}", "--window", "1"]
    command.run_from_argv([*argv, "--skip-checks"])  # returns: exit status 0
    assert len(bodies(jobs)) == 1


def test_a_key_with_a_newline_is_escaped_in_the_outcome(jobs: PostgresQueue) -> None:
    enqueue("jobs", "a\nb", "--task", "{}", "--window", "300")
    _, err = enqueue("jobs", "a\nb", "--task", "{}", "--window", "300")
    assert err == "a\\nb is already claimed; nothing sent\n"


DEEP = "[" * 12_000 + "]" * 12_000


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["nope", "k", "--task", "{}", "--window", "1"], "unknown queue 'nope'; .*jobs"),
        (["jobs", "k", "--task", "{nope", "--window", "1"], "--task is not valid JSON"),
        (["jobs", "k", "--task", "{}", "--window", "nan"], "argument --window: must be finite"),
        (["jobs", "k", "--task", "{}", "--window", "-1"], "argument --window: must be more than 0"),
        (["jobs", "k", "--task", "{}", "--window", "1e999"], "argument --window: must be finite"),
        (["jobs", "k", "--task", "{}", "--window", "0"], "argument --window: must be more than 0"),
        (
            ["jobs", "k", "--task", "{}", "--window", "abc"],
            "argument --window: must be a number of seconds, got 'abc'",
        ),
        (["jobs", "k", "--task", "{}", "--window", "9" * 20], "argument --window: must be from 0"),
        (["jobs", "k", "--task", DEEP, "--window", "1"], "^--task is nested too deeply"),
        (
            ["jobs", "k", "--task", '{"a": [{"b": NaN}]}', "--window", "1"],
            "^--task is not valid JSON",
        ),
        (["jobs", "k", "--task", "{}"], "no window"),
        (["jobs", "", "--task", "{}", "--window", "1"], "key must not be empty"),
        (["jobs", "k", "--window", "1"], "KEY and --task are required"),
        (["jobs", "k", "--task", '"x"', "--file", "f"], "not both"),
        (["jobs", "k", "--task", "[1]", "--window", "1", "--database", "x"], "--database"),
        (["jobs", "k", "--task", json.dumps("x" * 140_000), "--window", "1"], "byte limit"),
    ],
)
def test_bad_arguments_are_named_and_nothing_is_written(
    jobs: PostgresQueue, args: list[str], match: str
) -> None:
    with pytest.raises(CommandError, match=match) as raised:
        enqueue(*args)
    assert "_seconds" not in str(raised.value)
    assert bodies(jobs) == []
    assert claims() == {}


def test_the_window_defaults_to_the_registered_tasks(jobs: PostgresQueue) -> None:
    registry.task(queue="jobs", window_seconds=45, name="jobs.task")(lambda task: None)
    try:
        enqueue("jobs", "k", "--task", "null")
    finally:
        registry.unregister("jobs")
    assert json.loads(bodies(jobs)[0])["windowSeconds"] == 45


def test_a_queue_of_several_tasks_sends_the_one_named_or_its_default(jobs: PostgresQueue) -> None:
    # It sent a body naming no task, which a queue without a default gives up
    # after its retries, and said only "no window" on the way.
    registry.task(queue="jobs", window_seconds=45, name="jobs.refresh")(lambda task: None)
    registry.task(queue="jobs", window_seconds=90, name="jobs.report", key_namespace="report")(
        lambda task: None
    )
    try:
        with pytest.raises(CommandError, match=r"several claimed tasks \(jobs\.refresh, jobs\.rep"):
            enqueue("jobs", "k", "--task", "1")
        with pytest.raises(CommandError, match=r"has no claimed task 'jobs\.gone'"):
            enqueue("jobs", "k", "--task", "1", "--task-name", "jobs.gone")
        assert bodies(jobs) == []
        out, _ = enqueue("jobs", "project:1", "--task", "1", "--task-name", "jobs.report")
        token = out.strip()
    finally:
        registry.unregister("jobs")
    assert bodies(jobs) == [
        f'{{"key":"report:project:1","claim":"{token}","windowSeconds":90,"task":1,'
        '"taskName":"jobs.report"}'
    ]
    assert claims()["report:project:1"][0] == token


class Terminal(io.StringIO):
    """Captured output that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_file_enqueues_json_lines_with_a_progress_bar(jobs: PostgresQueue, tmp_path: Path) -> None:
    lines = [json.dumps({"key": f"room:{n % 3}", "task": {"n": n}}) for n in range(6)]
    lines.insert(2, "")
    lines.append(json.dumps({"key": "room:9", "task": None, "window": 5}))
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out, err = Terminal(), Terminal()
    call_command(
        "enqueue_claimed", "jobs", "--file", path, "--window", "60", stdout=out, stderr=err
    )
    assert out.getvalue().strip() == "4 enqueued, 3 already claimed, 7 lines"
    assert err.getvalue().endswith("[##############################] 7/7\n")
    sent = [json.loads(body) for body in bodies(jobs)]
    assert [(b["key"], b["windowSeconds"]) for b in sent] == [
        ("room:0", 60),
        ("room:1", 60),
        ("room:2", 60),
        ("room:9", 5),
    ]


def test_file_lines_go_in_one_statement_per_run_of_one_window(
    jobs: PostgresQueue, tmp_path: Path
) -> None:
    lines = [{"key": f"k{n}", "task": n} for n in range(1500)]
    lines += [{"key": "short", "task": 1, "window": 5}, {"key": "k0", "task": 2}]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with CaptureQueriesContext(connection) as queries:
        out, _ = enqueue("jobs", "--file", str(path), "--window", "60")
    assert out == "1501 enqueued, 1 already claimed, 1502 lines\n"
    sends = [query for query in queries if "INSERT INTO taskclaim.message" in query["sql"]]
    # 1000 lines, 500 lines, the line with its own window, the last line.
    assert len(sends) == 4
    assert len(bodies(jobs)) == 1501


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("{nope", "line 2: not valid JSON"),
        ('["k", 1]', "line 2: expected a JSON object"),
        ('{"key": "k"}', "line 2: missing task"),
        ('{"key": "k", "task": 1, "when": 2}', "line 2: unknown field"),
        ('{"key": 5, "task": 1}', "line 2: key must be a str"),
        ('{"key": "k", "task": 1, "window": -5}', "line 2: window must be more than 0"),
        ('{"key": "k", "task": 1, "window": 0}', "line 2: window must be more than 0"),
        (
            json.dumps({"key": "k", "task": DEEP}).replace(f'"{DEEP}"', DEEP),
            "line 2: nested too deeply",
        ),
        ('{"key": "k", "task": {"a": NaN}}', "line 2: not valid JSON: NaN"),
        ('{"key": "k", "task": {"a": 1e999}}', "line 2: not valid JSON: 1e999"),
    ],
)
def test_a_bad_line_is_named_before_anything_is_sent(
    jobs: PostgresQueue, tmp_path: Path, line: str, match: str
) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"key": "good", "task": 1}) + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(CommandError, match=match):
        enqueue("jobs", "--file", str(path), "--window", "60")
    assert bodies(jobs) == []
    assert claims() == {}


def test_a_line_that_is_not_utf8_is_named(jobs: PostgresQueue, tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(b'{"key": "a", "task": 1}\n{"key": "caf\xe9", "task": 1}\n')
    with pytest.raises(CommandError, match="--file line 2: not UTF-8"):
        enqueue("jobs", "--file", str(path), "--window", "60")
    assert bodies(jobs) == []


@pytest.mark.usefixtures("jobs")
def test_a_misconfigured_queue_fails_before_any_claim() -> None:
    backend = "astral_taskclaim.queues.postgres.PostgresQueue"
    config = {"jobs": {"BACKEND": backend, "OPTIONS": {"visibility_timeout": -1}}}
    with (
        override_settings(TASKCLAIM_QUEUES=config),
        pytest.raises(CommandError, match="visibility_timeout'\\] must be"),
    ):
        enqueue("jobs", "k", "--task", "{}", "--window", "60")
    assert claims() == {}


def test_file_dash_reads_stdin(jobs: PostgresQueue, monkeypatch: pytest.MonkeyPatch) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(b'{"key": "a", "task": 1, "window": 9}\n'))
    monkeypatch.setattr("sys.stdin", stdin)
    out, _ = enqueue("jobs", "--file", "-")
    assert out.strip() == "1 enqueued, 0 already claimed, 1 lines"


def test_a_missing_file_is_named(jobs: PostgresQueue, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="--file: cannot open"):
        enqueue("jobs", "--file", str(tmp_path / "missing.jsonl"), "--window", "1")


@pytest.mark.parametrize("terminal", ["stdout", "stderr"])
def test_no_progress_bar_unless_run_at_a_terminal(
    jobs: PostgresQueue, tmp_path: Path, terminal: str
) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"key": "a", "task": 1}\n{"key": "a", "task": 2}\n', encoding="utf-8")
    streams = {"stdout": io.StringIO(), "stderr": io.StringIO()}
    streams[terminal] = Terminal()  # the other one is redirected
    call_command("enqueue_claimed", "jobs", "--file", path, "--window", "60", **streams)
    assert streams["stdout"].getvalue() == "1 enqueued, 1 already claimed, 2 lines\n"
    assert streams["stderr"].getvalue() == ""


def test_a_queue_the_tasks_backend_runs_is_refused_naming_it() -> None:
    # The test settings' Django Tasks backend sends to queue "default".
    assert "default" in registry.queues()
    assert not registry.tasks_of("default")
    with (
        CaptureQueriesContext(connection) as queries,
        pytest.raises(CommandError, match=r"queue 'default' carries the Django Tasks"),
    ):
        enqueue("default", "room:1", "--task", "{}", "--window", "300")
    assert len(queries) == 0  # refused before anything is written
    assert claims() == {}
