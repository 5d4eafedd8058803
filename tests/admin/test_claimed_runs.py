"""The admin's claimed-task runs: list, filters, search, detail, retry."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.urls import reverse

from astral_taskclaim.claims.claim import claim_task
from astral_taskclaim.models import ClaimedRun
from astral_taskclaim.tasks import ClaimedTask, registry
from tests.admin.data import client_for, staff

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]

CHANGELIST = reverse("admin:astral_taskclaim_claimedrun_changelist")


POSTGRES = {"BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue"}


@pytest.fixture
def task() -> Iterator[ClaimedTask[Any]]:
    made = registry.task(queue="jobs", name="tests.refresh", window_seconds=300)(lambda task: None)
    with override_settings(TASKCLAIM_QUEUES={"default": POSTGRES, "jobs": POSTGRES}):
        yield made
    registry.unregister("jobs")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskclaim.run")
        cursor.execute("DELETE FROM taskclaim.message")


def add_run(
    status: str,
    key: str,
    *,
    payload: Any = None,
    traceback: str = "Boom\n",
    run_id: str | None = None,
) -> str:
    run_id = run_id or str(uuid.uuid4())
    errors = (
        []
        if status == "SUCCESSFUL"
        else [
            {
                "exception_class_path": "app.Boom",
                "message": "it broke",
                "traceback": traceback,
                "attempt": 1,
                "at": "2026-01-01T00:00:00+00:00",
                "final": status == "FAILED",
            }
        ]
    )
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO taskclaim.run (id, task, queue, key, status, attempts, errors,
                 worker_ids, payload, started_at, last_attempted_at, finished_at)
               VALUES (%s, 'tests.refresh', 'jobs', %s, %s, 1, %s::jsonb,
                 '["host:1"]', %s, now(), now(), CASE WHEN %s <> 'RETRYING' THEN now() END)""",
            [
                run_id,
                key,
                status,
                json.dumps(errors),
                None if payload is None else json.dumps(payload),
                status,
            ],
        )
    return run_id


def messages_sent() -> list[dict[str, Any]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT body FROM taskclaim.message ORDER BY id")
        return [json.loads(body) for (body,) in cursor.fetchall()]


def test_the_list_filters_by_status_task_and_queue_and_searches_by_id_and_key(
    task: ClaimedTask[Any],
) -> None:
    done = add_run("SUCCESSFUL", "project:1")
    failed = add_run("FAILED", "project:2", payload={"id": 2})
    client = client_for(staff("viewer", "view_claimedrun"))
    page = client.get(CHANGELIST, {"status": "FAILED"}).content.decode()
    assert failed in page
    assert done not in page
    page = client.get(CHANGELIST, {"task": "tests.refresh", "queue": "jobs"}).content.decode()
    assert failed in page
    assert done in page
    assert "tests.refresh" in client.get(CHANGELIST).content.decode()  # the task filter lists it
    page = client.get(CHANGELIST, {"q": "project:1"}).content.decode()
    assert done in page
    assert failed not in page
    page = client.get(CHANGELIST, {"q": failed}).content.decode()
    assert failed in page
    assert done not in page


def test_the_detail_page_shows_each_error_with_its_traceback_cut(task: ClaimedTask[Any]) -> None:
    run_id = add_run("FAILED", "project:3", payload={"id": 3}, traceback="T" * 20_000_000)
    client = client_for(staff("viewer", "view_claimedrun"))
    page = client.get(reverse("admin:astral_taskclaim_claimedrun_change", args=(run_id,)))
    text = page.content.decode()
    assert "app.Boom" in text
    assert "it broke" in text
    assert "host:1" in text
    assert "T" * 10_000 + "…" in text
    assert "Cut after 10000 of 20000000 characters." in text


def test_odd_rows_never_break_the_pages(task: ClaimedTask[Any]) -> None:
    run_id = add_run("FAILED", "project:4")
    with connection.cursor() as cursor:
        cursor.execute(
            """UPDATE taskclaim.run SET errors = '{"not": "a list"}', worker_ids = '7',
                 started_at = '-infinity', finished_at = 'infinity' WHERE id = %s""",
            [run_id],
        )
    client = client_for(staff("viewer", "view_claimedrun"))
    assert client.get(CHANGELIST).status_code == 200
    detail = reverse("admin:astral_taskclaim_claimedrun_change", args=(run_id,))
    assert client.get(detail).status_code == 200


def test_retry_needs_the_add_permission_and_enqueues_under_a_new_claim(
    task: ClaimedTask[Any],
) -> None:
    failed = add_run("FAILED", "project:5", payload={"id": 5})
    form = {"action": "retry_runs", "_selected_action": [failed]}
    viewer = client_for(staff("viewer", "view_claimedrun"))
    viewer.post(CHANGELIST, form)
    assert messages_sent() == []
    retrier = client_for(staff("retrier", "view_claimedrun", "add_claimedrun"))
    page = retrier.post(CHANGELIST, form, follow=True).content.decode()
    assert "1 run enqueued again under a new claim." in page
    [body] = messages_sent()
    assert (body["key"], body["task"]) == ("project:5", {"id": 5})
    assert body["claim"] != failed


def test_retry_says_why_a_run_was_not_enqueued(task: ClaimedTask[Any]) -> None:
    claimed = add_run("FAILED", "project:6", payload={"id": 6})
    kept = add_run("FAILED", "project:7")  # no payload kept
    token = claim_task("project:6", window_seconds=300)
    retrier = client_for(staff("retrier", "view_claimedrun", "add_claimedrun"))
    form = {"action": "retry_runs", "_selected_action": [claimed, kept]}
    page = retrier.post(CHANGELIST, form, follow=True).content.decode()
    assert f"its key is claimed (run {token})" in page
    assert "its task payload was not kept" in page
    assert "0 runs enqueued again under a new claim." in page
    assert messages_sent() == []
    assert ClaimedRun.objects.count() == 2


def test_retry_shows_a_run_id_starting_with_a_letter_as_it_is(task: ClaimedTask[Any]) -> None:
    # The admin capitalizes each message's first letter: the id must not come first.
    run_id = "a14b77ea-0000-4000-8000-000000000001"
    add_run("FAILED", "project:8", payload={"id": 8}, run_id=run_id)
    token = claim_task("project:8", window_seconds=300)
    retrier = client_for(staff("retrier", "view_claimedrun", "add_claimedrun"))
    form = {"action": "retry_runs", "_selected_action": [run_id]}
    page = retrier.post(CHANGELIST, form, follow=True).content.decode()
    assert f"Run {run_id}: its key is claimed (run {token})" in page
    assert "A14b77ea" not in page


def test_retry_says_why_a_run_that_did_not_fail_is_not_enqueued(task: ClaimedTask[Any]) -> None:
    done = add_run("SUCCESSFUL", "project:9", payload={"id": 9})
    retrying = add_run("RETRYING", "project:10", payload={"id": 10})
    failed = add_run("FAILED", "project:11", payload={"id": 11})
    retrier = client_for(staff("retrier", "view_claimedrun", "add_claimedrun"))
    form = {"action": "retry_runs", "_selected_action": [done, retrying, failed]}
    page = retrier.post(CHANGELIST, form, follow=True).content.decode()
    assert f"Run {done}: it succeeded; nothing to enqueue again" in page
    assert f"Run {retrying}: it is still being retried; its own message runs it again" in page
    assert "1 run enqueued again under a new claim." in page
    [body] = messages_sent()
    assert body["key"] == "project:11"


def test_retry_names_ten_runs_that_did_not_fail_and_sums_up_the_rest(
    task: ClaimedTask[Any],
) -> None:
    done = [add_run("SUCCESSFUL", f"project:done-{n}") for n in range(12)]
    retrier = client_for(staff("retrier", "view_claimedrun", "add_claimedrun"))
    form = {"action": "retry_runs", "_selected_action": done}
    page = retrier.post(CHANGELIST, form, follow=True).content.decode()
    assert page.count(": it succeeded; nothing to enqueue again") == 10
    assert "The other selected runs that did not fail are not enqueued again either." in page
    assert "0 runs enqueued again under a new claim." in page
    assert messages_sent() == []


def test_retry_sends_the_runs_key_once_namespaced_and_the_tasks_enqueue_coalesces_with_it(
    task: ClaimedTask[Any],
) -> None:
    # The same task, now claiming its keys in a namespace: a run keeps the key it claimed.
    namespaced = registry.task(
        queue="jobs", name="tests.refresh", window_seconds=300, key_namespace="bn"
    )(lambda task: None)
    failed = add_run("FAILED", "bn:p1", payload={"id": 1})
    retrier = client_for(staff("retrier", "view_claimedrun", "add_claimedrun"))
    form = {"action": "retry_runs", "_selected_action": [failed]}
    page = retrier.post(CHANGELIST, form, follow=True).content.decode()
    assert "1 run enqueued again under a new claim." in page
    [body] = messages_sent()
    assert body["key"] == "bn:p1"
    assert namespaced.enqueue("p1", {"id": 1}) is None  # coalesced: the retry holds the claim
    assert len(messages_sent()) == 1


BUTTON = 'name="_detail_action"'


def test_the_detail_page_of_a_failed_run_enqueues_it_again_with_the_add_permission(
    task: ClaimedTask[Any],
) -> None:
    failed = add_run("FAILED", "project:12", payload={"id": 12})
    done = add_run("SUCCESSFUL", "project:13", payload={"id": 13})
    detail = reverse("admin:astral_taskclaim_claimedrun_change", args=(failed,))
    viewer = client_for(staff("viewer", "view_claimedrun"))
    assert BUTTON not in viewer.get(detail).content.decode()
    assert viewer.post(detail, {"_detail_action": ""}).status_code == 403
    retrier_user = staff("retrier", "view_claimedrun", "add_claimedrun")
    retrier = client_for(retrier_user)
    page = retrier.get(detail).content.decode()
    assert BUTTON in page
    assert 'value="Enqueue again"' in page
    done_page = reverse("admin:astral_taskclaim_claimedrun_change", args=(done,))
    assert BUTTON not in retrier.get(done_page).content.decode()
    assert messages_sent() == []  # showing the button enqueues nothing
    forged = client_for(retrier_user, enforce_csrf_checks=True)
    assert forged.post(detail, {"_detail_action": ""}).status_code == 403
    assert messages_sent() == []
    response = retrier.post(detail, {"_detail_action": ""})
    assert (response.status_code, response["Location"]) == (302, detail)
    assert "1 run enqueued again under a new claim." in retrier.get(detail).content.decode()
    [body] = messages_sent()
    assert (body["key"], body["task"]) == ("project:12", {"id": 12})
