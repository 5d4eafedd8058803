"""Fixtures of the browser tests: Chromium through Playwright, a page on
pytest-django's live server, and empty claim and message tables."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from .support import CHROMIUM, LAUNCH_ARGS, sync_api


def _empty_tables() -> None:
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE taskclaim.claim, taskclaim.message")


@pytest.fixture(scope="module")
def _sync_orm_beside_playwright() -> Iterator[None]:
    """Playwright's sync API keeps an event loop running on this thread
    while the browser is open, and Django refuses ORM calls from a thread
    with a running loop unless told it is safe; it is here: the calls are
    the test's own, made between browser steps."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        yield


@pytest.fixture(autouse=True)
def _clean_tables(_sync_orm_beside_playwright: None) -> Iterator[None]:
    """Empty claim and message tables (a transactional test's flush leaves
    the app's unmanaged tables alone)."""
    _empty_tables()
    yield
    _empty_tables()


@pytest.fixture(scope="module")
def browser(_sync_orm_beside_playwright: None) -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, live_server: Any) -> Iterator[Any]:
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()
