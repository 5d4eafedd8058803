"""The admin's task results: list, filters, search, detail, retry, cancel."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client, override_settings
from django.urls import reverse

from astral_taskclaim.tasks_backend.compat import TaskResultDoesNotExist, TaskResultStatus
from tests.aiokit import run

from . import jobs
from .running import claims, drain, message_rows

CHANGELIST = "admin:astral_taskclaim_storedtaskresult_changelist"


@pytest.fixture
def staff(transactional_db: None) -> Any:
    def make(*codenames: str) -> Client:
        user = User.objects.create_user("viewer", password="x", is_staff=True)
        for codename in ("view_storedtaskresult", *codenames):
            user.user_permissions.add(Permission.objects.get(codename=codename))
        client = Client()
        client.force_login(user)
        return client

    return make


def test_the_list_filters_by_status_and_searches_by_id_and_key(staff: Any) -> None:
    client = staff()
    done = jobs.add.enqueue(1, 2)
    drain()
    waiting = jobs.refresh_by_key.enqueue(4)
    url = reverse(CHANGELIST)
    page = client.get(url, {"status": "SUCCESSFUL"}).content.decode()
    assert done.id in page
    assert waiting.id not in page
    page = client.get(url, {"q": "room:4"}).content.decode()
    assert waiting.id in page
    assert done.id not in page
    page = client.get(url, {"q": done.id}).content.decode()
    assert done.id in page
    assert waiting.id not in page


def test_the_detail_page_shows_each_errors_traceback_and_the_message_its_last_error(
    staff: Any,
) -> None:
    client = staff("view_queuemessage")
    with override_settings(TASKCLAIM_DELAY_SCALE=0.001):
        result = jobs.flaky.enqueue(1)
        drain(max_messages=1)
    url = reverse("admin:astral_taskclaim_storedtaskresult_change", args=(result.id,))
    page = client.get(url).content.decode()
    assert "tests.tasks_backend.jobs.Boom" in page
    assert "Traceback" in page
    assert "attempt failed (1 to go)" in page
    messages = client.get(reverse("admin:astral_taskclaim_queuemessage_changelist"))
    assert "Boom: attempt failed (1 to go)" in messages.content.decode()


def test_the_detail_page_says_which_queue_is_which(staff: Any) -> None:
    result = jobs.add.enqueue(1, 2)
    url = reverse("admin:astral_taskclaim_storedtaskresult_change", args=(result.id,))
    page = staff().get(url).content.decode()
    # Django's name of the Task's queue, and the queue the run travels on.
    assert "Task queue_name:</label>" in page
    assert "TASKCLAIM_QUEUES alias:</label>" in page


def test_cancel_needs_the_change_permission_and_stops_the_run(staff: Any) -> None:
    result = jobs.add.enqueue(1, 2)
    url = reverse(CHANGELIST)
    form = {"action": "cancel_runs", "_selected_action": [result.id]}
    viewer = staff()
    viewer.post(url, form)
    assert jobs.add.get_result(result.id).status == TaskResultStatus.READY
    user = User.objects.get(username="viewer")
    user.user_permissions.add(Permission.objects.get(codename="change_storedtaskresult"))
    viewer.post(url, form)
    cancelled = jobs.add.get_result(result.id)
    assert cancelled.status == TaskResultStatus.FAILED
    assert cancelled.errors[-1].exception_class_path.endswith("RunCancelled")
    drain()  # its message is acked without running
    assert jobs.calls == []
    assert message_rows() == []


def test_retry_needs_the_add_permission_and_enqueues_a_new_run(staff: Any) -> None:
    failed = jobs.fails_once_for_good.enqueue()
    drain()
    url = reverse(CHANGELIST)
    form = {"action": "retry_runs", "_selected_action": [failed.id]}
    client = staff()
    client.post(url, form)
    assert message_rows() == []
    user = User.objects.get(username="viewer")
    user.user_permissions.add(Permission.objects.get(codename="add_storedtaskresult"))
    client.post(url, form)
    [(body, *_rest)] = message_rows()
    assert body["task"]["taskPath"] == jobs.fails_once_for_good.module_path
    assert body["claim"] != failed.id


def test_cancelling_a_coalescing_run_releases_its_key_and_retry_makes_a_new_run(
    staff: Any,
) -> None:
    cancelled = jobs.refresh_by_key.enqueue(7)
    client = staff("change_storedtaskresult", "add_storedtaskresult")
    url = reverse(CHANGELIST)
    client.post(url, {"action": "cancel_runs", "_selected_action": [cancelled.id]})
    assert claims() == []
    again = jobs.refresh_by_key.enqueue(7)
    assert again.id != cancelled.id  # a new run, not the cancelled one
    drain()
    assert jobs.calls == [("refresh_by_key", 7, "")]


def test_retry_says_so_when_the_runs_key_is_still_claimed(staff: Any) -> None:
    cancelled = jobs.refresh_by_key.enqueue(8)
    client = staff("change_storedtaskresult", "add_storedtaskresult")
    url = reverse(CHANGELIST)
    client.post(url, {"action": "cancel_runs", "_selected_action": [cancelled.id]})
    current = jobs.refresh_by_key.enqueue(8)
    queued = message_rows()
    response = client.post(
        url, {"action": "retry_runs", "_selected_action": [cancelled.id]}, follow=True
    )
    page = response.content.decode()
    assert f"Run {cancelled.id}: not enqueued: its key is claimed by run {current.id}" in page
    assert "0 runs enqueued again." in page
    assert message_rows() == queued


ODD_ROWS = {
    "infinite": ("'infinity'", "'[]'"),
    "far": ("'10000-01-01 00:00:00+00'", "'[]'"),
    "workers": ("now()", "'{\"a\": 1}'"),
    "number": ("now()", "'5'"),
}


@pytest.mark.parametrize("kind", ODD_ROWS)
def test_odd_rows_show_in_the_admin_and_get_result_says_they_do_not_exist(
    staff: Any, kind: str
) -> None:
    finished_at, worker_ids = ODD_ROWS[kind]
    result = jobs.add.enqueue(1, 2)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""UPDATE taskclaim.task_result
                SET status = 'SUCCESSFUL', finished_at = {finished_at},
                    started_at = {finished_at}, worker_ids = {worker_ids}::jsonb,
                    errors = '[5, {{"x": 1}}]'::jsonb
                WHERE id = %s::uuid""",
            [result.id],
        )
    client = staff()
    assert client.get(reverse(CHANGELIST)).status_code == 200
    detail = reverse("admin:astral_taskclaim_storedtaskresult_change", args=(result.id,))
    assert client.get(detail).status_code == 200
    with pytest.raises(TaskResultDoesNotExist, match="cannot be read"):
        jobs.add.get_result(result.id)
    with pytest.raises(TaskResultDoesNotExist, match="cannot be read"):
        run(jobs.add.aget_result(result.id))


def test_a_huge_traceback_is_cut_on_the_detail_page(staff: Any) -> None:
    result = jobs.add.enqueue(1, 2)
    error = {"exception_class_path": "x.Huge", "traceback": "T" * 20_000_000, "attempt": 1}
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE taskclaim.task_result SET errors = jsonb_build_array(%s::jsonb) "
            "WHERE id = %s::uuid",
            [json.dumps(error), result.id],
        )
    detail = reverse("admin:astral_taskclaim_storedtaskresult_change", args=(result.id,))
    page = staff().get(detail).content.decode()
    assert "T" * 10_000 + "…" in page
    assert "T" * 10_001 not in page
    assert "Cut after 10000 of 20000000 characters." in page


def test_retry_sends_the_key_the_run_coalesced_under_so_enqueue_coalesces_with_it(
    staff: Any,
) -> None:
    # A key given at enqueue (using(key=...)) is the run's, not the task's default.
    cancelled = jobs.refresh.using(key="room:all").enqueue(5)
    client = staff("change_storedtaskresult", "add_storedtaskresult")
    url = reverse(CHANGELIST)
    client.post(url, {"action": "cancel_runs", "_selected_action": [cancelled.id]})
    drain()  # its message is acked unrun
    client.post(url, {"action": "retry_runs", "_selected_action": [cancelled.id]})
    [(body, *_rest)] = message_rows()
    assert body["key"] == "room:all"
    again = jobs.refresh.using(key="room:all").enqueue(5)
    assert again.id == body["claim"]  # coalesced with the retried run
    assert len(message_rows()) == 1


def test_retry_says_so_when_the_runs_window_was_given_at_enqueue(staff: Any) -> None:
    cancelled = jobs.add.using(key="sum:1", window_seconds=60).enqueue(1, 2)
    client = staff("change_storedtaskresult", "add_storedtaskresult")
    url = reverse(CHANGELIST)
    client.post(url, {"action": "cancel_runs", "_selected_action": [cancelled.id]})
    drain()
    form = {"action": "retry_runs", "_selected_action": [cancelled.id]}
    page = client.post(url, form, follow=True).content.decode()
    assert f"Run {cancelled.id}: not enqueued: its window was given when it was enqueued" in page
    assert "0 runs enqueued again." in page
    assert message_rows() == []


def test_the_detail_page_of_a_failed_run_retries_it_with_the_add_permission(staff: Any) -> None:
    failed = jobs.fails_once_for_good.enqueue()
    drain()
    detail = reverse("admin:astral_taskclaim_storedtaskresult_change", args=(failed.id,))
    client = staff()
    assert 'name="_detail_action"' not in client.get(detail).content.decode()
    assert client.post(detail, {"_detail_action": ""}).status_code == 403
    user = User.objects.get(username="viewer")
    user.user_permissions.add(Permission.objects.get(codename="add_storedtaskresult"))
    assert 'name="_detail_action" value="Retry"' in client.get(detail).content.decode()
    assert message_rows() == []
    response = client.post(detail, {"_detail_action": ""}, follow=True)
    assert response.redirect_chain == [(detail, 302)]
    assert "1 run enqueued again." in response.content.decode()
    [(body, *_rest)] = message_rows()
    assert body["task"]["taskPath"] == jobs.fails_once_for_good.module_path
