"""Every Python and console block of README.md, docs/quickstart.md and
docs/django-tasks.md, run in order in fresh ``startproject`` projects with
the wheel built from this tree, installed by the pages' own install line (so
an example that stops working fails the suite, on each CI leg's Python and
Django). How the blocks run, and what stands for a reader's own objects:
:mod:`tests.e2e.docs_pages`. The blocks not run are :data:`SKIPPED`."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import django
import pytest

from tests.e2e.docs_pages import Block, Project, blocks
from tests.e2e.support import build_wheel

pytestmark = pytest.mark.slow

#: The pages, by the project they run in: the Django Tasks page continues the
#: quickstart's project, as its reader would.
PROJECTS = {"readme": ["README.md"], "quickstart": ["docs/quickstart.md", "docs/django-tasks.md"]}
#: Blocks not run, on purpose: (page, first line) and why.
SKIPPED = {
    ("README.md", "make demo   # runs the main job end to end on an embedded PostgreSQL"): (
        "commands of this repository's checkout (make demo runs in tests/e2e/test_demo.py)"
    ),
    ("README.md", "make docs    # the documentation (Sphinx), warnings as errors"): (
        "commands of this repository's checkout"
    ),
    (
        "docs/quickstart.md",
        "make demo   # the main job end to end: triggers, coalescing, workers, retries",
    ): ("commands of this repository's checkout"),
}


def is_skipped(block: Block) -> bool:
    return (block.page, block.first_line) in SKIPPED


def test_every_skipped_block_is_on_a_page_and_only_repository_commands_are_skipped() -> None:
    found = {
        (b.page, b.first_line) for pages in PROJECTS.values() for p in pages for b in blocks(p)
    }
    assert set(SKIPPED) <= found
    assert all(line.startswith("make ") for _, line in SKIPPED)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment beside ``astral-taskclaim/dist``, the wheel's
    folder the pages' install line names, with this suite's Django (so each
    CI leg runs its own): the pages' install line adds the rest."""
    base = tmp_path_factory.mktemp("docs")
    dist = base / "astral-taskclaim" / "dist"
    dist.mkdir(parents=True)
    build_wheel(dist)
    venv = base / "venv"
    Project(base, venv, []).run(sys.executable, "-m", "venv", str(venv))
    Project(base, venv, []).run(
        "python", "-m", "pip", "install", "--quiet", f"django=={django.get_version()}"
    )
    return venv


@pytest.mark.parametrize("name", list(PROJECTS))
def test_the_pages_examples_run_in_a_fresh_project(venv: Path, name: str) -> None:
    pages = [block for page in PROJECTS[name] for block in blocks(page) if not is_skipped(block)]
    apps = sorted(
        {b.header.split("/")[0] for b in pages if b.header and "/settings" not in b.header}
    )
    project = Project(venv.parent / name, venv, apps)
    project.create()
    try:
        for block in pages:
            if block.language == "console":
                project.console(block)
            else:
                project.python(block)
    finally:
        project.close_session()
    # What the pages add up to checks clean.
    check = project.run("python", "manage.py", "check", "--database", "default")
    assert "ERRORS" not in check
    text = "\n".join(project.outputs)
    assert "refreshing project 42" in text
    assert re.search(r"default: project:42 attempt 1: ok in [\d.]+ s", text), text
    # project:42's claim, and the slot claims of the built-in upkeep schedules
    # the workers run where pg_cron is not loaded.
    assert re.search(r"claims in default: [1-9]\d* active, 0 expired", text), text
    if name == "quickstart":
        assert re.search(r"tasks: .*send_receipt.* attempt 1: ok", text), text
    assert not (
        project.path / ".pgdata" / "postmaster.pid"
    ).exists()  # stopped with the last process
