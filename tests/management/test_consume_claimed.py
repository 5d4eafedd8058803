"""manage.py consume_claimed: the worker behind a command line."""

from __future__ import annotations

import io
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import override_settings

from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.queues.postgres import PostgresQueue
from astral_taskclaim.tasks import ClaimedTask, registry
from tests.queues.postgres.pgqueue import bodies

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

ran: list[Any] = []


@pytest.fixture
def jobs_task() -> Iterator[ClaimedTask[Any]]:
    ran.clear()
    task = registry.task(queue="jobs", name="tests.jobs")(ran.append)
    yield task
    registry.unregister("jobs")


def consume(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("consume_claimed", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def consume_encoded(*args: str, encoding: str = "utf-8") -> str:
    """stdout as a console's: a byte stream in ``encoding`` that raises on
    what it cannot encode (a StringIO takes any str, a lone surrogate too)."""
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding=encoding, errors="strict", write_through=True)
    call_command("consume_claimed", *args, stdout=out, stderr=io.StringIO())
    out.flush()
    return raw.getvalue().decode(encoding)


def send_raw(queue: PostgresQueue, body: str) -> None:
    """A message of ``body`` as any producer may write it, past the checks
    of ``send``."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO taskclaim.message (queue, body) VALUES (%s, %s)",
            [queue.queue_name, body],
        )


@pytest.mark.usefixtures("jobs_task")
def test_burst_runs_the_queue_and_logs_a_line_per_batch(jobs: PostgresQueue) -> None:
    for n in range(3):
        enqueue_claimed(jobs, f"k{n}", {"n": n}, window_seconds=60)
    out, err = consume("jobs", "--burst", "--wait", "0", "--batch-size", "2")
    assert ran == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert bodies(jobs) == []
    lines = out.splitlines()
    assert lines[0] == "jobs: 3 received, 3 ok, 0 retried, 0 failed, 0 malformed, 0 unparseable"
    assert lines[1] == (
        "jobs: burst done: ran 3 messages (3 ok, 0 retried, 0 failed, 0 malformed, 0 unparseable); "
        "0 handed back unrun; 0 left leased (settlement not written: delivered again when "
        "their leases run out); queue now: 0 ready, 0 delayed, 0 leased"
    )
    assert err.count("ok, 0 retried, 0 failed, 0 malformed") == 2  # one line per batch


@pytest.mark.usefixtures("jobs_task")
def test_a_burst_of_one_says_one_message_and_nothing_at_verbosity_0(jobs: PostgresQueue) -> None:
    enqueue_claimed(jobs, "k1", 1, window_seconds=60)
    out, _ = consume("jobs", "--burst", "--wait", "0")
    assert out.splitlines()[1].startswith("jobs: burst done: ran 1 message (1 ok, ")
    enqueue_claimed(jobs, "k2", 2, window_seconds=60)
    assert consume("jobs", "--burst", "--wait", "0", "--verbosity", "0") == ("", "")
    assert ran == [1, 2]
    assert bodies(jobs) == []


@pytest.mark.parametrize("concurrency", ["1", "2"])
def test_verbosity_2_escapes_a_key_and_settles_its_batch(
    jobs: PostgresQueue, concurrency: str
) -> None:
    """A lone surrogate (valid JSON, no valid key: malformed) made writing
    the run's line raise before the batch was settled, at every restart;
    a newline or a terminal escape in a key forged lines."""
    ran.clear()
    registry.task(queue="jobs", name="tests.jobs_keys")(ran.append)
    try:
        send_raw(jobs, f'{{"key":"\\ud800","claim":"{uuid.uuid4()}","windowSeconds":60,"task":0}}')
        enqueue_claimed(jobs, "a\nb\x1b[2J", 1, window_seconds=60)
        args = ("jobs", "--burst", "--wait", "0", "-v", "2", "--concurrency", concurrency)
        out = consume_encoded(*args)
    finally:
        registry.unregister("jobs")
    assert bodies(jobs) == []  # both settled: one malformed, one run
    runs = sorted(line for line in out.splitlines() if " attempt " in line)
    assert len(runs) == 2
    assert re.fullmatch(r"jobs: \\ud800 attempt 1: malformed in \d+\.\d{3} s", runs[0])
    assert re.fullmatch(r"jobs: a\\nb\\x1b\[2J attempt 1: ok in \d+\.\d{3} s", runs[1])
    assert "\x1b" not in out
    assert ran == [1]


@pytest.mark.usefixtures("jobs_task")
def test_a_key_the_console_cannot_encode_is_escaped(jobs: PostgresQueue) -> None:
    enqueue_claimed(jobs, "café ☕", 1, window_seconds=60)
    out = consume_encoded("jobs", "--burst", "--wait", "0", "-v", "2", encoding="ascii")
    assert out.splitlines()[0].startswith("jobs: caf\\xe9 \\u2615 attempt 1: ok in ")
    assert bodies(jobs) == []


@pytest.mark.usefixtures("jobs_task")
def test_verbosity_0_is_quiet_and_max_messages_stops(jobs: PostgresQueue) -> None:
    for n in range(3):
        enqueue_claimed(jobs, f"k{n}", {"n": n}, window_seconds=60)
    out, err = consume("jobs", "--max-messages", "2", "--verbosity", "0")
    assert (out, err) == ("", "")
    assert len(ran) == 2
    assert len(bodies(jobs)) == 1


@pytest.mark.usefixtures("jobs")
def test_no_registered_task_lists_the_registered_ones() -> None:
    registry.task(queue="other", name="tests.other")(ran.append)
    try:
        with pytest.raises(CommandError, match=r"queue 'jobs'; registered: .*other → tests\.other"):
            consume("jobs", "--burst")
    finally:
        registry.unregister("other")


@pytest.mark.usefixtures("jobs", "jobs_task")
@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["nope"], "unknown queue 'nope'; TASKCLAIM_QUEUES has: jobs"),
        (["jobs", "--batch-size", "0"], "batch_size must be from 1 to 100"),
        (["jobs", "--wait", "-1"], "wait must be"),
        (["jobs", "--max-messages", "0"], "^--max-messages must be from 1 or more, got 0$"),
        (["--concurrency", "0"], "^--concurrency must be from 1 or more, got 0$"),
        (["jobs", "--concurrency", "-2"], "^--concurrency must be from 1 or more, got -2$"),
        (
            ["--queue-concurrency", "nosuch=3"],
            "^--queue-concurrency nosuch=3: unknown queue 'nosuch'; TASKCLAIM_QUEUES has: jobs$",
        ),
        (
            ["jobs", "--queue-concurrency", "jobs=0"],
            "^--queue-concurrency jobs=0: concurrency must be from 1 or more, got 0$",
        ),
        (["jobs", "--queue-concurrency", "jobs=²"], "takes QUEUE=N, got 'jobs=²'"),
    ],
)
def test_bad_arguments(args: list[str], match: str) -> None:
    with pytest.raises(CommandError, match=match):
        consume(*args)


@pytest.mark.usefixtures("jobs_task")
def test_a_misconfigured_queue_is_refused_before_running() -> None:
    backend = "astral_taskclaim.queues.postgres.PostgresQueue"
    config = {"jobs": {"BACKEND": backend, "OPTIONS": {"poll_interval": 0}}}
    with (
        override_settings(TASKCLAIM_QUEUES=config),
        pytest.raises(CommandError, match="poll_interval'\\] must be"),
    ):
        consume("jobs", "--burst")


def test_verbosity_2_prints_a_line_per_task_run(jobs: PostgresQueue) -> None:
    def run(task: Any) -> None:
        if task == "bad":
            raise RuntimeError("boom")

    registry.task(queue="jobs", name="tests.jobs_v2", max_retries=1)(run)
    try:
        enqueue_claimed(jobs, "good", "fine", window_seconds=60)
        enqueue_claimed(jobs, "bad", "bad", window_seconds=60)
        out, _ = consume("jobs", "--burst", "--wait", "0", "--verbosity", "2")
    finally:
        registry.unregister("jobs")
    runs = [line for line in out.splitlines() if " attempt " in line]
    assert len(runs) == 2
    assert re.fullmatch(r"jobs: good attempt 1: ok in \d+\.\d{3} s", runs[0])
    assert re.fullmatch(r"jobs: bad attempt 1: retried in \d+\.\d{3} s", runs[1])
    # The retry is delayed: the burst leaves it queued and says so.
    assert out.splitlines()[-1].endswith("queue now: 0 ready, 1 delayed, 0 leased")


@pytest.mark.usefixtures("jobs_task")
def test_verbosity_1_prints_no_line_per_run(jobs: PostgresQueue) -> None:
    enqueue_claimed(jobs, "k", 1, window_seconds=60)
    out, _ = consume("jobs", "--burst", "--wait", "0")
    assert " attempt " not in out


@pytest.mark.usefixtures("jobs_task")
@pytest.mark.parametrize(
    ("args", "address"), [([], "127.0.0.1"), (["--metrics-address", "0.0.0.0"], "0.0.0.0")]
)
def test_metrics_listen_on_loopback_unless_told_otherwise(
    jobs: PostgresQueue, monkeypatch: pytest.MonkeyPatch, args: list[str], address: str
) -> None:
    servers: list[Any] = []

    def start(port: int, addr: str, registry: Any) -> Any:
        servers.append((port, addr))
        return None

    monkeypatch.setattr("astral_taskclaim.worker.metrics.start_http_server", start)
    consume("jobs", "--burst", "--wait", "0", "--metrics-port", "9464", *args)
    assert servers == [(9464, address)]


@pytest.mark.usefixtures("jobs_task")
def test_no_queue_named_consumes_every_queue_with_a_task_side_by_side(jobs: PostgresQueue) -> None:
    for n in range(4):
        enqueue_claimed(jobs, f"k{n}", {"n": n}, window_seconds=60)
    out, _ = consume("--burst", "--wait", "0", "--concurrency", "3")
    assert sorted(task["n"] for task in ran) == [0, 1, 2, 3]
    assert out.splitlines()[0].startswith("jobs: 4 received, 4 ok")
    assert bodies(jobs) == []


def test_several_queues_and_a_cap_of_their_own(jobs: PostgresQueue) -> None:
    other = f"command-{uuid.uuid4().hex}"
    backend = "astral_taskclaim.queues.postgres.PostgresQueue"
    config = {
        "jobs": {"BACKEND": backend, "OPTIONS": {"queue_name": jobs.queue_name}},
        "mail": {"BACKEND": backend, "OPTIONS": {"queue_name": other}},
    }
    ran.clear()
    try:
        with override_settings(TASKCLAIM_QUEUES=config):
            for alias in config:
                task = registry.task(queue=alias, name=f"tests.{alias}", window_seconds=60)
                task(ran.append).enqueue(f"{alias}:1", alias)
            args = ("jobs", "mail", "--burst", "--wait", "0", "--queue-concurrency", "mail=2")
            out, _ = consume(*args)
            with pytest.raises(CommandError, match="--queue-concurrency takes QUEUE=N, got 'mail'"):
                consume("jobs", "mail", "--queue-concurrency", "mail")
            with pytest.raises(
                CommandError,
                match=r"^--queue-concurrency mail=2: queue 'mail' is configured but not consumed "
                r"by this worker \(consuming: jobs\)$",
            ):
                consume("jobs", "--queue-concurrency", "mail=2")
    finally:
        for alias in config:
            registry.unregister(alias)
    assert sorted(ran) == ["jobs", "mail"]
    lines = out.splitlines()
    assert [line.split(":")[0] for line in lines if "received" in line] == ["jobs", "mail"]


def test_max_messages_is_for_the_whole_process(jobs: PostgresQueue) -> None:
    """With a quiet queue beside, the process exits after N in all."""
    backend = "astral_taskclaim.queues.postgres.PostgresQueue"
    quiet = f"command-{uuid.uuid4().hex}"
    config = {
        "jobs": {"BACKEND": backend, "OPTIONS": {"queue_name": jobs.queue_name}},
        "quiet": {"BACKEND": backend, "OPTIONS": {"queue_name": quiet}},
    }
    ran.clear()
    try:
        with override_settings(TASKCLAIM_QUEUES=config):
            for alias in config:
                registry.task(queue=alias, name=f"tests.{alias}", window_seconds=60)(ran.append)
            for n in range(3):
                enqueue_claimed(jobs, f"k{n}", n, window_seconds=60)
            out, _ = consume("--max-messages", "2", "--wait", "0.1")
    finally:
        for alias in config:
            registry.unregister(alias)
    assert ran == [0, 1]
    assert len(bodies(jobs)) == 1
    assert out.splitlines()[0].startswith("jobs: 2 received, 2 ok")


def test_help_says_every_queue_is_consumed_when_none_is_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        call_command("consume_claimed", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "every TASKCLAIM_QUEUES alias with a claimed task or a Django Tasks backend when none is"
        in text
    )
    assert "default: every one with a claimed task or a Django Tasks backend" in text
    assert "--concurrency" in text
    assert "Exit after receiving this many, all queues together." in text
