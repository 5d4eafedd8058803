"""The wheel: built from the tree, installed into a fresh virtual environment,
it migrates and checks the example project with no source tree in sight."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection

from astral_taskclaim.db import sqlfiles
from tests.e2e.support import build_wheel

ROOT = Path(__file__).resolve().parent.parent
DATABASE = "taskclaim_wheel_check"

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


def run(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(arg) for arg in args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("dist"))


def test_wheel_ships_sql_templates_static_and_types(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {f"astral_taskclaim/{sqlfiles._package_path(p)}" for p in sqlfiles._all_paths()}
    assert shipped <= names
    assert "astral_taskclaim/py.typed" in names
    assert any(n.startswith("astral_taskclaim/templates/admin/") for n in names)
    assert any(n.startswith("astral_taskclaim/static/astral_taskclaim/") for n in names)
    assert not any(n.startswith(("tests/", "example_project/", "benchmarks/")) for n in names)


@pytest.fixture
def scratch_database() -> Iterator[str]:
    """A URL of an empty database on the test server, dropped afterwards."""
    settings = connection.settings_dict
    with connection.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        cursor.execute(f"CREATE DATABASE {DATABASE}")
    host = settings["HOST"] or settings["OPTIONS"].get("host", "")
    user = settings["USER"] or "postgres"
    if host.startswith("/"):
        url = f"postgres://{user}@/{DATABASE}?host={quote(host, safe='/')}"
    else:
        url = f"postgres://{user}@{host}:{settings['PORT'] or 5432}/{DATABASE}"
    yield url
    with connection.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")


@pytest.mark.django_db(transaction=True)
def test_installed_wheel_migrates_and_checks_the_example_project(
    wheel: Path, scratch_database: str, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "--quiet", f"{wheel}[binary,example]")
    project = tmp_path / "example_project"
    shutil.copytree(ROOT / "example_project", project, ignore=shutil.ignore_patterns(".pgdata*"))
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "DATABASE_URL": scratch_database,
        "TASKCLAIM_QUEUE": "postgres",
    }
    where = run(
        python,
        "-c",
        "import astral_taskclaim; print(astral_taskclaim.__file__)",
        cwd=tmp_path,
        env=env,
    )
    assert str(venv) in where
    run(python, "manage.py", "migrate", "--no-input", "-v", "0", cwd=project, env=env)
    out = run(python, "manage.py", "check", "--database", "default", cwd=project, env=env)
    assert "System check identified" in out
    assert "ERRORS" not in out
    tables = run(
        python,
        "manage.py",
        "shell",
        "-c",
        "from django.db import connection; c = connection.cursor(); c.execute("
        "\"SELECT to_regclass('taskclaim.claim'), slug.slug('Room 52')\"); print(c.fetchone())",
        cwd=project,
        env=env,
    )
    assert "('taskclaim.claim', 'room-52')" in tables
