"""The overview's charts of task runs by outcome: the query, its
indexes, and the page."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.urls import reverse

from astral_taskclaim.admin.runs import _WINDOWS, _run_history
from astral_taskclaim.db import sqlfiles
from tests.admin.data import add_run, client_for, staff

pytestmark = pytest.mark.django_db

OVERVIEW = reverse("admin:astral_taskclaim_overview")
HOUR, DAY = _WINDOWS


def nonzero(counts: dict[str, list[int]]) -> dict[str, dict[int, int]]:
    """Each outcome's non-empty buckets (bucket 0 the latest)."""
    return {
        outcome: {bucket: n for bucket, n in enumerate(buckets) if n}
        for outcome, buckets in counts.items()
    }


def test_runs_are_counted_by_outcome_in_the_bucket_of_their_time() -> None:
    add_run("SUCCESSFUL", finished_ago=30)
    add_run("SUCCESSFUL", finished_ago=40)
    # Retried twice, then succeeded: three events at three times.
    add_run("SUCCESSFUL", finished_ago=3 * 60 + 5, retried_ago=(20 * 60 + 5, 9 * 60 + 5))
    add_run("FAILED", finished_ago=5 * 60 + 30, retried_ago=(7 * 60 + 30,), final_error=True)
    add_run("FAILED", finished_ago=45 * 60 + 10)  # cancelled: no error time
    add_run("READY", retried_ago=(10 * 60 + 30,))  # waiting for its retry
    add_run("RUNNING", retried_ago=(2 * 3600 + 5,))  # retried two hours ago
    add_run("READY")  # queued, never attempted
    add_run("SUCCESSFUL", finished_ago=3 * 3600 + 10)
    add_run("SUCCESSFUL", finished_ago=25 * 3600)  # before the day

    assert nonzero(_run_history("default", HOUR)) == {
        "succeeded": {0: 2, 3: 1},
        "retried": {9: 1, 10: 1, 20: 1, 7: 1},
        "failed": {5: 1, 45: 1},
    }
    assert nonzero(_run_history("default", DAY)) == {
        "succeeded": {0: 3, 6: 1},
        "retried": {0: 4, 4: 1},
        "failed": {0: 1, 1: 1},
    }


def test_the_query_reads_two_index_ranges_however_many_runs_are_queued() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            "EXPLAIN (FORMAT JSON) " + sqlfiles.read("admin/run_history.sql"),
            {"bucket_seconds": 60, "buckets": 60},
        )
        [(plan,)] = cursor.fetchall()
    text = json.dumps(plan if not isinstance(plan, str) else json.loads(plan))
    assert "task_result_finished_at_idx" in text
    assert "task_result_retrying_idx" in text
    assert "run_finished_at_idx" in text
    assert "run_retrying_idx" in text
    assert '"Seq Scan"' not in text


def add_claimed_run(status: str, *, finished_ago: float | None, retried_ago: float) -> None:
    """A claimed task's run in ``taskclaim.run`` with one retried attempt."""
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO taskclaim.run (id, task, queue, key, status, attempts, errors,
                 started_at, last_attempted_at, finished_at)
               VALUES (gen_random_uuid(), 'app.job', 'default', gen_random_uuid()::text, %s, 2,
                 jsonb_build_array(jsonb_build_object('final', false, 'attempt', 1,
                   'at', clock_timestamp() - make_interval(secs => %s))),
                 now(), now(), clock_timestamp() - make_interval(secs => %s))""",
            [status, retried_ago, finished_ago],
        )


def test_claimed_task_runs_are_counted_with_the_django_task_runs() -> None:
    add_run("SUCCESSFUL", finished_ago=30)
    add_claimed_run("SUCCESSFUL", finished_ago=40, retried_ago=2 * 60 + 5)
    add_claimed_run("FAILED", finished_ago=5 * 60 + 30, retried_ago=6 * 60 + 5)
    add_claimed_run("RETRYING", finished_ago=None, retried_ago=8 * 60 + 5)
    assert nonzero(_run_history("default", HOUR)) == {
        "succeeded": {0: 2},
        "retried": {2: 1, 6: 1, 8: 1},
        "failed": {5: 1},
    }


def drawn(html: str, chart: str, outcome: str) -> int:
    """The runs ``chart``'s bars of ``outcome`` add up to."""
    svg = html[html.index(f'<svg id="taskclaim-runs-{chart}"') :].split("</svg>")[0]
    pattern = rf'class="taskclaim-bar taskclaim-{outcome}"[^>]*data-count="(\d+)"'
    return sum(int(n) for n in re.findall(pattern, svg))


def test_the_overview_draws_both_charts_with_their_text(admin_client) -> None:
    add_run("SUCCESSFUL", finished_ago=90, retried_ago=(150,))
    add_run("FAILED", finished_ago=2 * 3600, final_error=True)

    html = admin_client.get(OVERVIEW).content.decode()

    assert (drawn(html, "hour", "succeeded"), drawn(html, "hour", "retried")) == (1, 1)
    assert drawn(html, "hour", "failed") == 0
    assert [drawn(html, "day", o) for o in ("succeeded", "retried", "failed")] == [1, 1, 1]
    assert "Runs per minute, last 60 minutes" in html
    assert "Runs per 30 minutes, last 24 hours" in html
    assert "1 succeeded, 1 retried, 0 failed" in html  # the hour's text alternative
    assert 'aria-labelledby="taskclaim-runs-hour-title taskclaim-runs-hour-desc"' in html
    assert html.count('id="taskclaim-runs-day-data"') == 1
    assert "1-2 min ago" in html


def test_the_charts_need_view_permission_on_task_results(client) -> None:
    add_run("SUCCESSFUL", finished_ago=90)
    without = client_for(staff("claimsonly", "view_claim")).get(OVERVIEW).content.decode()
    assert "taskclaim-runs" not in without

    viewer = client_for(staff("runviewer", "view_claim", "view_storedtaskresult"))
    assert drawn(viewer.get(OVERVIEW).content.decode(), "hour", "succeeded") == 1


def test_the_heading_and_text_alternative_say_both_kinds_of_run_are_counted(
    admin_client,
) -> None:
    add_run("SUCCESSFUL", finished_ago=30)
    add_claimed_run("SUCCESSFUL", finished_ago=40, retried_ago=2 * 60 + 5)

    html = admin_client.get(OVERVIEW).content.decode()

    assert "<h2>Task runs by outcome</h2>" in html
    assert "Django Task runs" not in html
    desc = html[html.index('id="taskclaim-runs-hour-desc"') :].split("</desc>")[0]
    assert "runs of Django Tasks and claimed tasks" in desc
    assert "2 succeeded, 1 retried, 0 failed" in desc
