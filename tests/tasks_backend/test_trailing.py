"""ClaimTaskBackend with ``trailing``: a call on a claimed key becomes the
key's one pending follow-up run, a TaskResult of its own, run when the
claim ends."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connection, transaction

from astral_taskclaim import Debounce
from astral_taskclaim.queues import queues
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.tasks_backend.compat import InvalidTask, TaskResultStatus, task_finished
from astral_taskclaim.tasks_backend.runner import Superseded

from . import jobs
from .running import claims, drain, make_due, message_rows

KEY = "doc:1"


@pytest.fixture(autouse=True)
def _no_follow_ups() -> Iterator[None]:
    """No follow-up before or after (other tests' may be left behind)."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.follow_up")
    yield
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.follow_up")


def follow_ups() -> list[tuple[str, str, bool]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key, token::text, taken_at IS NOT NULL FROM taskclaim.follow_up "
            "ORDER BY created_at"
        )
        return cursor.fetchall()


def expire() -> None:
    """The claim of the key ends now (its run's window is over)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE taskclaim.claim SET expires_at = now() - interval '1 second' WHERE key = %s",
            [KEY],
        )


def run_both() -> None:
    """Runs the run holding the key, then, its claim over, the follow-up."""
    make_due()
    drain()
    expire()
    make_due()
    drain()


def stored(result: Any) -> Any:
    return result.task.get_backend().get_result(result.id)


@pytest.fixture
def finished() -> Iterator[list[Any]]:
    """The TaskResults ``task_finished`` is sent with."""
    seen: list[Any] = []

    def receiver(sender: Any, task_result: Any, **_: Any) -> None:
        seen.append(task_result)

    task_finished.connect(receiver)
    yield seen
    task_finished.disconnect(receiver)


def test_a_call_on_a_claimed_key_makes_a_follow_up_later_calls_merge_into() -> None:
    first = jobs.rebuild.enqueue(1, version=1)
    created = jobs.rebuild.enqueue(1, version=2)
    merged = jobs.rebuild.enqueue(1, version=3)
    assert first.id != created.id == merged.id
    assert (created.status, created.kwargs) == (TaskResultStatus.READY, {"version": 2})
    # "latest": the follow-up's row takes the latest call's arguments.
    assert (merged.status, merged.kwargs) == (TaskResultStatus.READY, {"version": 3})
    assert stored(created).kwargs == {"version": 3}
    assert follow_ups() == [(KEY, created.id, False)]
    assert claims() == [(KEY, first.id)]
    [now, later] = [body for body, *_ in message_rows()]
    assert (now["claim"], now["trailing"]) == (first.id, True)
    assert (later["claim"], later["followUp"]) == (created.id, True)
    make_due()
    stats = drain()
    assert (stats.ok, stats.follow_up_waits) == (1, 1)  # it waits for the claim
    expire()
    make_due()
    assert drain().ok == 1
    assert jobs.calls == [("rebuild", 1, 1), ("rebuild", 1, 3)]
    done = stored(created)
    assert (done.status, done.return_value, done.kwargs) == (
        TaskResultStatus.SUCCESSFUL,
        3,
        {"version": 3},
    )
    assert claims() == [(KEY, created.id)]  # a window from the follow-up's start


def test_a_follow_up_and_its_result_row_commit_or_roll_back_together() -> None:
    first = jobs.rebuild.enqueue(1)

    def enqueue_then_fail() -> None:
        with transaction.atomic():
            jobs.rebuild.enqueue(1, version=2)
            assert len(follow_ups()) == 1
            raise LookupError

    with pytest.raises(LookupError):
        enqueue_then_fail()
    assert follow_ups() == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT id::text FROM taskclaim.task_result")
        assert cursor.fetchall() == [(first.id,)]
    assert len(message_rows()) == 1


def test_first_mode_keeps_the_first_calls_arguments_and_using_sets_it() -> None:
    task = jobs.rebuild.using(trailing="first")
    task.enqueue(1, version=1)
    created = task.enqueue(1, version=2)
    assert task.enqueue(1, version=3).kwargs == {"version": 2}
    run_both()
    assert jobs.calls == [("rebuild", 1, 1), ("rebuild", 1, 2)]
    assert stored(created).status == TaskResultStatus.SUCCESSFUL


def test_using_trailing_false_coalesces_as_before() -> None:
    first = jobs.rebuild.enqueue(1)
    assert jobs.rebuild.using(trailing=False).enqueue(1, version=9).id == first.id
    assert follow_ups() == []
    assert len(message_rows()) == 1


def test_a_debounce_runs_nothing_at_once() -> None:
    task = jobs.rebuild.using(trailing=Debounce(30))
    created = task.enqueue(1, version=1)
    assert task.enqueue(1, version=2).id == created.id
    assert claims() == []
    assert follow_ups() == [(KEY, created.id, False)]
    assert stored(created).kwargs == {"version": 2}


def test_a_run_superseded_before_it_starts_ends_failed(finished: list[Any]) -> None:
    first = jobs.rebuild.enqueue(1, version=1)
    created = jobs.rebuild.enqueue(1, version=2)
    expire()  # both still queued when the key's claim ends
    again = jobs.rebuild.enqueue(1, version=3)
    assert again.id not in (first.id, created.id)
    assert follow_ups() == []
    make_due()
    stats = drain()
    assert (stats.ok, stats.superseded) == (1, 2)
    assert jobs.calls == [("rebuild", 1, 3)]
    for result in (first, created):
        gone = stored(result)
        assert gone.status == TaskResultStatus.FAILED
        [error] = gone.errors
        assert error.exception_class_path == f"{Superseded.__module__}.Superseded"
        assert "Superseded" in error.traceback
    assert {r.id for r in finished} == {first.id, created.id, again.id}


def test_a_forged_follow_up_naming_a_run_neither_ends_nor_runs_it() -> None:
    result = jobs.refresh.enqueue(1)  # coalescing, no trailing
    [body] = [body for body, *_ in message_rows()]
    jobs.rebuild.enqueue(1)
    follow_up = jobs.rebuild.enqueue(1, version=2)
    with connection.cursor() as cursor:  # the real messages come later
        cursor.execute("UPDATE taskclaim.message SET visible_at = now() + interval '1 hour'")
    for forged in (
        {**body, "followUp": True},  # the run's key and id (it holds its key)
        {**body, "key": KEY, "followUp": True},  # its id, another key
        {**body, "claim": follow_up.id, "followUp": True},  # a follow-up's id, another key
    ):
        queues["default"].send(forged)
    assert drain().superseded == 3
    assert jobs.calls == []
    for run in (result, follow_up):
        assert (stored(run).status, stored(run).errors) == (TaskResultStatus.READY, [])
    assert follow_ups() == [(KEY, follow_up.id, False)]
    make_due()
    drain()
    assert stored(result).status == TaskResultStatus.SUCCESSFUL


def test_a_remote_queue_records_the_follow_up_and_a_failed_send_leaves_none(
    memory_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = jobs.rebuild.enqueue(1)

    def refuse(self: Any, body: Any, *, delay_seconds: float = 0) -> None:
        raise ConnectionError("the queue refused the message")

    with monkeypatch.context() as patch:
        patch.setattr(MemoryQueue, "send", refuse)
        with pytest.raises(ConnectionError):
            jobs.rebuild.enqueue(1, version=2)
    assert follow_ups() == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT id::text FROM taskclaim.task_result")
        assert cursor.fetchall() == [(first.id,)]
    created = jobs.rebuild.enqueue(1, version=2)
    assert follow_ups() == [(KEY, created.id, False)]
    assert stored(created).status == TaskResultStatus.READY
    assert len(memory_backend.entries) == 2


def undecorated() -> None: ...


@pytest.mark.parametrize(
    ("options", "culprit"),
    [
        ({"window_seconds": 60, "trailing": "sometimes"}, "trailing must be"),
        ({"window_seconds": 60, "trailing": 1}, "trailing must be"),
        ({"trailing": "latest"}, "trailing needs window_seconds"),
        ({"trailing": Debounce(5)}, "trailing needs window_seconds"),
    ],
)
def test_a_bad_trailing_is_refused_naming_it(options: dict[str, Any], culprit: str) -> None:
    with pytest.raises(InvalidTask, match=culprit):
        jobs._task(**options)(undecorated)
    with pytest.raises(InvalidTask, match=culprit):
        jobs.add.using(**options).enqueue(1, 2)
    assert (claims(), message_rows(), follow_ups()) == ([], [], [])


def test_aenqueue_takes_trailing() -> None:
    first = async_to_sync(jobs.rebuild.aenqueue)(1, version=1)
    created = async_to_sync(jobs.rebuild.aenqueue)(1, version=2)
    merged = async_to_sync(jobs.rebuild.aenqueue)(1, version=3)
    assert first.id != created.id == merged.id
    assert merged.kwargs == {"version": 3}
    assert follow_ups() == [(KEY, created.id, False)]
    assert uuid.UUID(created.id)
