"""A rolling deploy: workers of the release before trailing runs (its
``astral_taskclaim`` taken from the repository with ``git archive``) beside
workers of this one, on one PostgreSQL queue and one claim table.

- Plain claimed tasks, some failing once: every task runs to success
  whichever release takes each attempt, none is given up, and each release
  runs some of them.
- The order docs/deployment.md gives for turning ``trailing`` on ("roll
  every worker out before the code that enqueues with it") is needed as it
  says: an old worker runs a follow-up's message as an ordinary one, at once
  while the key is still claimed, and leaves the follow-up pending.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.db import connection

from astral_taskclaim.claims.claim import enqueue_claimed
from tests.reliability.processes import Fleet, runs
from tests.reliability.support import ROOT, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

#: The last commit before trailing runs (migration 0015).
OLD_RELEASE = "e2f65c3"


@pytest.fixture(scope="module")
def old_release(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The prefix that starts a worker on the old release's package (the
    tests' settings and task module are this tree's)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", OLD_RELEASE, "astral_taskclaim"],
        capture_output=True,
        check=False,
    )
    if archive.returncode:
        pytest.skip(f"needs the repository's history ({OLD_RELEASE})")
    target = tmp_path_factory.mktemp("old-release")
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    # Started in the old package's folder, which ``-m`` puts first on the path.
    prefix = ["env", "-C", str(target), f"PYTHONPATH={ROOT}"]
    where = subprocess.run(
        [
            *prefix,
            sys.executable,
            "-c",
            "import astral_taskclaim; print(astral_taskclaim.__file__)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.startswith(str(target)), where.stdout  # the old code, not this tree's
    return prefix


def test_old_and_new_workers_side_by_side_run_every_task_and_give_none_up(
    fleet: Fleet, old_release: list[str]
) -> None:
    for prefix in (old_release, [], old_release):
        fleet.start("--concurrency", "2", "--batch-size", "4", prefix=prefix)
    old = {worker.process.pid: True for worker in fleet.workers}
    old[fleet.workers[1].process.pid] = False
    tasks = [
        {"id": id_, "mode": "fail_first" if id_ % 5 == 0 else "ok", "sleep_ms": id_ % 7}
        for id_ in range(1, 121)
    ]
    fleet.enqueue(tasks)
    wait_until(
        lambda: len(runs()) == len(tasks) and all(r[-1] == "ok" for r in runs().values()),
        "every task run",
    )
    outcomes = runs()
    assert all(outcomes[task["id"]][0] == "fail" for task in tasks if task["mode"] == "fail_first")
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT pid FROM reliability_run")
        releases = {old[pid] for (pid,) in cursor.fetchall()}
    assert releases == {True, False}  # both releases ran tasks
    assert all(worker.stop() == 0 for worker in fleet.running())
    assert fleet.messages_left() == 0
    events = fleet.events()
    assert events["queue.task_failed"] == events["queue.task_abandoned"] == 0


def test_an_old_worker_runs_a_follow_up_as_an_ordinary_message_so_workers_roll_out_first(
    fleet: Fleet, old_release: list[str]
) -> None:
    fleet.start("--wait", "1", prefix=old_release)
    queue = fleet.queue()
    key = "reliability:1"
    first = enqueue_claimed(queue, key, {"id": 1}, window_seconds=1, trailing="latest")
    wait_until(lambda: runs() == {1: ["ok"]}, "the first run")
    follow_up = enqueue_claimed(queue, key, {"id": 2}, window_seconds=1, trailing="latest")
    merged = enqueue_claimed(queue, key, {"id": 3}, window_seconds=1, trailing="latest")
    assert (follow_up.outcome, merged.outcome, merged) == ("follow_up_created", "merged", follow_up)
    # Delivered when the claim ends, it runs the task it was sent with (not
    # the merged latest one), claims nothing and leaves the follow-up pending.
    wait_until(lambda: runs() == {1: ["ok"], 2: ["ok"]}, "the follow-up's message run")
    with connection.cursor() as cursor:
        cursor.execute("SELECT token::text FROM taskclaim.claim WHERE key = %s", [key])
        assert cursor.fetchall() == [(str(first),)]
        cursor.execute(
            "SELECT token::text, taken_at FROM taskclaim.follow_up WHERE key = %s", [key]
        )
        assert cursor.fetchall() == [(str(follow_up), None)]
    # The key's next trigger finds it free: sent, superseding the follow-up.
    assert (
        enqueue_claimed(queue, key, {"id": 4}, window_seconds=1, trailing="latest").outcome
        == "sent"
    )
    wait_until(lambda: 4 in runs(), "the next trigger's run")
    assert 3 not in runs()
