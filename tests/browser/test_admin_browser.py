"""The admin end to end in headless Chromium (Debian's ``chromium``, driven
by Playwright's Python package) against pytest-django's live server: log
in, browse, search a key, release a claim, see the overview chart, and a
view-only user who cannot release. Screenshots go to
``tests/artifacts/screenshots/`` (git-ignored).

Set ``TASKCLAIM_CHROMIUM`` to use another Chromium binary.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import connection

from tests.admin.data import PASSWORD, add_message, claim_keys, envelope, staff
from tests.claimkit import insert_claim

from .support import BROWSER_MARKS, expect, log_in, shot

pytestmark = BROWSER_MARKS


def test_log_in_browse_search_and_release(page: Any) -> None:
    for key in ("project:4", "project:42", "project:5"):
        insert_claim(key, seconds=600)
    staff("releaser", "view_claim", "delete_claim")

    log_in(page, "releaser")
    page.goto("/admin/astral_taskclaim/")
    page.get_by_role("link", name="Claims", exact=True).click()
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(3)
    expect(page.locator("#result_list")).to_contain_text("in 10 min")
    shot(page, "claims-changelist")

    page.fill("#searchbar", "project:4")
    page.press("#searchbar", "Enter")
    expect(rows).to_have_count(2)
    expect(page.locator("#result_list")).not_to_contain_text("project:5")
    shot(page, "claims-search")

    page.locator("#result_list tr", has_text="project:42").locator("input.action-select").check()
    page.select_option("select[name=action]", "release_claims")
    page.click("button[name=index]")
    expect(page.locator("ul.messagelist")).to_contain_text("Released 1 claim.")
    shot(page, "claims-released")
    assert claim_keys() == {"project:4", "project:5"}


def test_overview_chart(page: Any, browser: Any, live_server: Any) -> None:
    insert_claim("soon", seconds=600)
    insert_claim("later", seconds=2 * 3600)
    add_message("refresh", envelope("soon", {"project": 42}), visible_in=45 * 60)
    User.objects.create_superuser("boss", password=PASSWORD)

    log_in(page, "boss")
    page.goto("/admin/astral_taskclaim/")
    page.locator("#taskclaim-overview-link a").click()
    chart = page.locator("svg#taskclaim-chart")
    expect(chart).to_be_visible()
    expect(chart.locator("rect.taskclaim-claims[data-count='1']")).to_have_count(2)
    expect(chart.locator("rect.taskclaim-messages[data-count='1']")).to_have_count(1)
    expect(page.locator("#taskclaim-message-counts")).to_contain_text("refresh")
    shot(page, "overview")

    # The same page without JavaScript: the chart is server-rendered SVG.
    cookies = page.context.cookies()
    plain = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    plain.add_cookies(cookies)
    no_js = plain.new_page()
    no_js.goto("/admin/astral_taskclaim/claim/overview/")
    expect(no_js.locator("svg#taskclaim-chart rect.taskclaim-claims")).to_have_count(12)
    shot(no_js, "overview-no-javascript")
    plain.close()


def test_view_only_user_cannot_release(page: Any) -> None:
    insert_claim("held", seconds=600)
    staff("viewer", "view_claim")

    log_in(page, "viewer")
    page.goto("/admin/astral_taskclaim/claim/")
    expect(page.locator("#result_list")).to_contain_text("held")
    expect(page.locator("select[name=action]")).to_have_count(0)
    expect(page.locator("#taskclaim-delete-expired")).to_have_count(0)
    shot(page, "claims-view-only")

    # Forge the action's POST from the page itself, with a valid CSRF token.
    status = page.evaluate(
        """async () => {
            const token = document.cookie.match(/csrftoken=([^;]+)/)[1];
            const body = new URLSearchParams({
                csrfmiddlewaretoken: token, action: "release_claims",
                _selected_action: "held", index: "0",
            });
            const response = await fetch(location.pathname, {method: "POST", body});
            return response.status;
        }"""
    )
    assert status == 200
    assert claim_keys() == {"held"}

    refused = page.goto("/admin/astral_taskclaim/claim/delete-expired/")
    assert refused is not None
    assert refused.status == 403


def test_message_task_is_shown_not_run(page: Any) -> None:
    message_id = add_message("mail", envelope("user:1", {"html": "<script>alert(1)</script>"}))
    User.objects.create_superuser("reader", password=PASSWORD)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    log_in(page, "reader")
    page.goto(f"/admin/astral_taskclaim/queuemessage/{message_id}/change/")
    task = page.locator("pre.taskclaim-json")
    expect(task).to_contain_text('"html": "<script>alert(1)</script>"')
    shot(page, "message-detail")
    assert dialogs == []


def test_at_1280_px_the_token_and_last_error_columns_are_in_view(page: Any) -> None:
    # As a newcomer's laptop shows them: the widest cells a list has.
    insert_claim("project:" + "4" * 60, seconds=600)
    message_id = add_message("default", envelope("project:" + "4" * 60, {"id": 4}))
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE taskclaim.message SET last_error = %s WHERE id = %s",
            ["RuntimeError: " + "the slow API answered 503 Service Unavailable " * 8, message_id],
        )
    User.objects.create_superuser("laptop", password=PASSWORD)
    log_in(page, "laptop")
    for path, column in (("claim", "column-token"), ("queuemessage", "column-last_error")):
        page.goto(f"/admin/astral_taskclaim/{path}/")
        shot(page, f"{path}-changelist-1280")
        expect(page.locator(f"#result_list th.{column}")).to_be_visible()
        # No column hidden past the list's right edge (it would scroll).
        shown = page.locator("#changelist .results").bounding_box()
        assert shown is not None
        for header in page.locator("#result_list thead th").all():
            box = header.bounding_box()
            assert box is not None
            assert box["x"] + box["width"] <= shown["x"] + shown["width"] + 1, (path, box, shown)
