"""Django Task results and the runs charts in headless Chromium: the
results list with its filters and search, a failed run's errors and
tracebacks, and the overview's charts of runs by outcome, with and without
JavaScript. Screenshots go to ``tests/artifacts/screenshots/``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection

from tests.admin.data import PASSWORD, add_run

from .support import BROWSER_MARKS, expect, log_in, shot

pytestmark = BROWSER_MARKS

RESULTS = "/admin/astral_taskclaim/storedtaskresult/"
OVERVIEW = "/admin/astral_taskclaim/claim/overview/"


def _empty_results() -> None:
    """No runs of either kind: the overview's charts count both."""
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE taskclaim.task_result, taskclaim.run")


@pytest.fixture(autouse=True)
def _clean_results(_sync_orm_beside_playwright: None) -> Iterator[None]:
    _empty_results()
    yield
    _empty_results()


@pytest.fixture
def boss() -> User:
    return User.objects.create_superuser("boss", password=PASSWORD)


def test_results_list_filters_by_status_and_searches_by_id(page: Any, boss: User) -> None:
    add_run("SUCCESSFUL", finished_ago=60)
    failed = add_run("FAILED", finished_ago=120, retried_ago=(300,), final_error=True)
    add_run("READY", task_path="tests.tasks_backend.jobs.refresh")

    log_in(page, "boss")
    page.goto("/admin/astral_taskclaim/")
    page.get_by_role("link", name="Task results", exact=True).click()
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(3)
    shot(page, "task-results-changelist")

    page.locator("#changelist-filter").get_by_role("link", name="Failed").click()
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text(failed)
    shot(page, "task-results-failed")

    page.goto(RESULTS)
    page.fill("#searchbar", failed)
    page.press("#searchbar", "Enter")
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("Failed")
    shot(page, "task-results-search")


def test_a_failed_runs_page_shows_each_error_and_traceback(page: Any, boss: User) -> None:
    failed = add_run(
        "FAILED",
        finished_ago=120,
        retried_ago=(300,),
        final_error=True,
        traceback='Traceback (most recent call last):\n  File "jobs.py"\nBoom: <b>never</b>\n',
    )

    log_in(page, "boss")
    page.goto(f"{RESULTS}{failed}/change/")
    tracebacks = page.locator("pre.taskclaim-traceback")
    expect(tracebacks).to_have_count(2)
    expect(tracebacks.first).to_contain_text("Boom: <b>never</b>")  # shown, not markup
    expect(page.locator(".field-error_history")).to_contain_text("tests.tasks_backend.jobs.Boom")
    expect(page.locator(".field-status")).to_contain_text("Failed")
    shot(page, "task-result-failed-detail")


def test_overview_charts_runs_by_outcome(
    page: Any,
    browser: Any,
    live_server: Any,
    boss: User,
) -> None:
    for ago in (30, 45, 200, 610, 1900):
        add_run("SUCCESSFUL", finished_ago=ago)
    add_run("SUCCESSFUL", finished_ago=400, retried_ago=(700, 1300))
    add_run("FAILED", finished_ago=900, retried_ago=(1000,), final_error=True)
    add_run("SUCCESSFUL", finished_ago=5 * 3600)
    add_run("FAILED", finished_ago=9 * 3600, final_error=True)

    log_in(page, "boss")
    page.goto(OVERVIEW)
    hour = page.locator("svg#taskclaim-runs-hour")
    expect(hour).to_be_visible()
    # 30 s and 45 s ago share the latest minute: one bar segment of two.
    expect(hour.locator("rect.taskclaim-succeeded")).to_have_count(5)
    expect(hour.locator("rect.taskclaim-succeeded[data-count='2']")).to_have_count(1)
    expect(hour.locator("rect.taskclaim-retried")).to_have_count(3)
    expect(hour.locator("rect.taskclaim-failed")).to_have_count(1)
    expect(page.locator("#taskclaim-runs-hour-totals")).to_contain_text("6 succeeded")
    expect(page.locator("#taskclaim-runs-day-totals")).to_contain_text("2 failed")
    expect(hour.locator("desc")).to_contain_text("6 succeeded, 3 retried, 1 failed")
    page.locator("#taskclaim-runs").scroll_into_view_if_needed()
    shot(page, "overview-runs")

    page.locator("#taskclaim-runs details summary").first.click()
    expect(page.locator("#taskclaim-runs-hour-data")).to_be_visible()
    expect(page.locator("#taskclaim-runs-hour-data tbody tr")).to_have_count(60)
    shot(page, "overview-runs-table")

    # Without JavaScript the charts are the same server-drawn SVG.
    plain = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    plain.add_cookies(page.context.cookies())
    no_js = plain.new_page()
    no_js.goto(OVERVIEW)
    expect(no_js.locator("svg#taskclaim-runs-day rect.taskclaim-failed")).to_have_count(2)
    shot(no_js, "overview-runs-no-javascript")
    plain.close()
