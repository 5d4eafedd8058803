"""What the browser tests share: the Chromium to drive, the marks every
browser test carries, and the steps they repeat (log in, screenshot)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.admin.data import PASSWORD

CHROMIUM = os.environ.get("TASKCLAIM_CHROMIUM") or shutil.which("chromium") or ""
SCREENSHOTS = Path(__file__).resolve().parent.parent / "artifacts" / "screenshots"
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")

BROWSER_MARKS = [
    pytest.mark.skipif(
        not (CHROMIUM and os.access(CHROMIUM, os.X_OK)),
        reason=f"no executable Chromium ({CHROMIUM or 'chromium not on PATH'}); install "
        "Debian's chromium or set TASKCLAIM_CHROMIUM",
    ),
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
]

expect = sync_api.expect


def shot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def log_in(page: Any, username: str) -> None:
    page.goto("/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page.locator("#user-tools")).to_contain_text(username)
