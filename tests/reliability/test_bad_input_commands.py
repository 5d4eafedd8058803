"""Bad options and arguments to the management commands: a
``CommandError`` naming the option (or the line of ``--file``), and
nothing written, with the same tables in place as ``test_bad_input``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from astral_taskclaim.tasks import ClaimedTask, registry
from tests.reliability.badinput import HUGE, SURROGATE, rejected

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("populated")]

TASK = ("--task", "{}", "--window", "60")


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["nope", "k2", *TASK], "unknown queue 'nope'"),
        (["bad", "", *TASK], "key must not be empty"),
        (["bad", "a\x00b", *TASK], "key must not contain NUL"),
        (["bad", HUGE, *TASK], "key is 100000 bytes of UTF-8"),
        (["bad", SURROGATE, *TASK], "key is not valid Unicode"),
        (["bad", "k2", "--task", "{nope", "--window", "60"], "--task is not valid JSON"),
        (["bad", "k2", "--task", '{"x": NaN}', "--window", "60"], "--task is not valid JSON: NaN"),
        (
            ["bad", "k2", "--task", json.dumps("x" * 200_000), "--window", "60"],
            "over the 131072-byte limit",
        ),
        (["bad", "k2", "--task", "{}", "--window", "abc"], "--window: must be a number of seconds"),
        (
            ["bad", "k2", "--task", "{}", "--window", "-1"],
            "--window: must be more than 0 and at most",
        ),
        (["bad", "k2", "--task", "{}", "--window", "nan"], "--window: must be finite"),
        (["bad", "k2", "--task", "{}", "--window", "inf"], "--window: must be finite"),
        (["bad", "k2", "--task", "{}", "--window", "1e12"], "--window: must be from 0 to"),
        (["bad", "k2", "--task", "{}"], "no window"),
        (["bad", "k2"], "KEY and --task are required"),
        (["bad", "k2", *TASK, "--database", "nope"], "--database: unknown database alias"),
        (["bad", "--file", "/nonexistent/tasks.jsonl"], "--file: cannot open"),
    ],
    ids=lambda value: None if isinstance(value, list) else str(value)[:40],
)
def test_enqueue_claimed_arguments(argv: list[str], match: str) -> None:
    rejected(lambda: call_command("enqueue_claimed", *argv), CommandError, match)


@pytest.mark.parametrize(
    ("lines", "match"),
    [
        (b'{"key": "a", "task": {}}\nnot json\n', "line 2: not valid JSON"),
        (b"[1]\n", "line 1: expected a JSON object"),
        (b'{"key": "a", "task": {}, "extra": 1}\n', "line 1: unknown field"),
        (b'{"key": "a"}\n', "line 1: missing task"),
        (b'{"key": "a\\u0000b", "task": {}}\n', "line 1: key must not contain NUL"),
        (b'{"key": "a", "task": {}, "window": -1}\n', "line 1: window must be more than 0"),
        (b'{"key": "a", "task": {}, "window": true}\n', "line 1: window must be an int or float"),
        # Latin-1 bytes, not UTF-8: named as a --file problem, not a traceback.
        (b'{"key": "a", "task": {}}\n{"key": "caf\xe9", "task": {}}\n', "--file|line 2"),
    ],
    ids=["json", "array", "field", "missing", "nul", "window", "bool", "latin-1"],
)
def test_enqueue_claimed_file_lines(lines: bytes, match: str, tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(lines)
    argv = ["bad", "--file", str(path), "--window", "60"]
    rejected(lambda: call_command("enqueue_claimed", *argv), CommandError, match)
    rejected(
        lambda: call_command("enqueue_claimed", "bad", "k2", "--file", str(path)),
        CommandError,
        "either KEY with --task, or --file",
    )


@pytest.fixture
def bad_task() -> Iterator[None]:
    """A claimed task registered for queue ``bad``, so the worker options
    are what the command checks."""
    registry.register(
        ClaimedTask(
            print,
            queue="bad",
            max_retries=0,
            parse=None,
            retry_after_ms=None,
            name="bad-input",
            window_seconds=None,
        )
    )
    yield
    registry.unregister("bad")


@pytest.mark.usefixtures("bad_task")
@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["nope"], "unknown queue 'nope'"),
        (["bad", "--batch-size", "0"], "batch_size must be from 1"),
        (["bad", "--batch-size", "-1"], "batch_size must be from 1"),
        (["bad", "--batch-size", "101"], "batch_size must be from 1 to 100"),
        (["bad", "--batch-size", "ten"], "--batch-size"),
        (["bad", "--wait", "-1"], "wait must be a number of seconds"),
        (["bad", "--wait", "nan"], "wait must be a number of seconds"),
        (["bad", "--wait", "inf"], "wait must be a number of seconds"),
        (["bad", "--wait", "soon"], "--wait"),
        (["bad", "--max-messages", "0"], "--max-messages must be from 1"),
        (["bad", "--max-messages", "x"], "--max-messages"),
    ],
    ids=lambda value: None if isinstance(value, list) else str(value)[:40],
)
def test_consume_claimed_options(argv: list[str], match: str) -> None:
    rejected(lambda: call_command("consume_claimed", *argv), CommandError, match)


@pytest.mark.parametrize(
    ("command", "argv", "match"),
    [
        ("taskclaim_delete_expired", ["--batch-size", "0"], "--batch-size"),
        ("taskclaim_delete_expired", ["--batch-size", "-5"], "--batch-size"),
        ("taskclaim_delete_expired", ["--batch-size", "many"], "--batch-size"),
        ("taskclaim_delete_expired", ["--database", "nope"], "--database: unknown"),
        ("taskclaim_delete_expired", ["--database", SURROGATE], "--database: unknown"),
        ("taskclaim_scrub", ["--no-input", "--database", "nope"], "--database: unknown"),
        ("taskclaim_scrub", ["--no-input", "--database", "a\x00b"], "--database: unknown"),
    ],
)
def test_maintenance_command_options(command: str, argv: list[str], match: str) -> None:
    # The expired claim "old" is still there afterwards: nothing was deleted.
    rejected(lambda: call_command(command, *argv), CommandError, match)
