"""The wheel: built from the tree, installed into a fresh virtual environment,
it migrates and checks the example project with no source tree in sight."""

from __future__ import annotations

import os
import re
import shlex
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
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", out, ROOT)
    (built,) = out.glob("astral_taskclaim-*.whl")
    return built


def test_wheel_ships_sql_templates_static_and_types(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {f"astral_taskclaim/{sqlfiles.package_path(p)}" for p in sqlfiles.all_paths()}
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


def readme_section(title: str) -> list[tuple[str, str]]:
    """The fenced blocks of the README's section ``title``: (language, text)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(\w+)\n(.*?)```", section, re.DOTALL)


def test_the_readme_section_using_it_in_a_project_works_in_a_fresh_project(
    wheel: Path, tmp_path: Path
) -> None:
    # Each step of the README, in order, in a new `django-admin startproject`;
    # the package is the wheel built from this tree, and the database the
    # embedded PostgreSQL the README's settings line starts.
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    project = tmp_path / "mysite"
    project.mkdir()
    env = {"PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "HOME": str(tmp_path)}
    settings = project / "mysite" / "settings.py"
    outputs: list[str] = []
    for language, block in readme_section("Using it in a project"):
        if language == "console":
            for line in block.strip().splitlines():
                command = shlex.split(line.split("  #")[0])
                if command[:2] == ["pip", "install"]:
                    spec = command[2].replace("astral-taskclaim", str(wheel))
                    run(python, "-m", "pip", "install", "--quiet", spec, env=env)
                    run(venv / "bin" / "django-admin", "startproject", "mysite", ".", cwd=project)
                    run(python, "manage.py", "startapp", "yourapp", cwd=project, env=env)
                    continue
                assert command[:2] == ["python", "manage.py"], line
                if command[2] == "consume_claimed":  # a worker runs until stopped
                    command += ["--burst", "--wait", "0", "-v", "2"]
                outputs.append(run(python, *command[1:], cwd=project, env=env))
        elif "INSTALLED_APPS" in block:
            code = block.replace("[...,", '[*INSTALLED_APPS, "yourapp",')
            settings.write_text(settings.read_text() + "\n" + code)
        elif block.startswith("# yourapp/tasks.py"):
            (project / "yourapp" / "tasks.py").write_text(block)
        elif "TASKCLAIM_QUEUES" in block:
            settings.write_text(settings.read_text() + "\n" + block)
        else:
            assert ".enqueue(" in block, block
            script = (
                "from types import SimpleNamespace; from yourapp.tasks import refresh_project; "
                "project = SimpleNamespace(id=42)\n" + block
            )
            run(python, "manage.py", "shell", "-c", script, cwd=project, env=env)
    text = "\n".join(outputs)
    assert "System check identified" in text
    assert "ERRORS" not in text
    assert "refreshing project 42" in text
    assert re.search(r"default: project:42 attempt 1: ok in [\d.]+ s", text), text
    assert "claims in default: 1 active, 0 expired" in text
    assert not (project / ".pgdata" / "postmaster.pid").exists()  # stopped with the last process
