"""Running a documentation page's examples as a newcomer pastes them.

:func:`blocks` reads a page's fenced ``python`` and ``console`` blocks in
order; :class:`Project` is a fresh ``django-admin startproject`` in a
virtual environment that runs them: console lines as commands, settings
blocks appended to ``settings.py``, blocks headed ``# app/module.py`` written
to (or appended to) that module, and every other Python block in one
``manage.py shell``-like session, so a name one block defines is there for
the next, as in a shell a reader keeps open.

What a reader supplies and the runner does instead, each on purpose:

- ``...`` (or ``# ...``) in ``INSTALLED_APPS`` stands for the apps
  ``startproject`` listed and the page's own apps (those its ``# app/…``
  blocks name), which the runner creates with ``manage.py startapp``;
- ``consume_claimed`` without ``--burst`` runs until stopped: the runner
  adds ``--burst --wait 0`` (and ``-v 2`` when no verbosity is given);
- a line ending in ``# Django 5.2 only`` runs only on Django 5.2;
- the names of :data:`PLACEHOLDERS` (a model instance of the reader's
  project) are defined in the session.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import django

__all__ = ["PLACEHOLDERS", "Block", "Project", "blocks"]

ROOT = Path(__file__).resolve().parents[2]

#: Names an example uses for the reader's own objects, and what stands for them.
PLACEHOLDERS = (
    "from types import SimpleNamespace\n"
    "project = SimpleNamespace(id=42)  # a model instance of the reader's\n"
    "order = SimpleNamespace(pk=7, save=lambda: None)  # another one\n"
)
DJANGO_5_ONLY = "# Django 5.2 only"
_SESSION = """
import json, sys, traceback
import django
django.setup()
namespace = {}
for line in sys.stdin:
    try:
        exec(compile(json.loads(line), "<doc block>", "exec"), namespace)
        print("\\x00ok", flush=True)
    except BaseException:
        traceback.print_exc(file=sys.stdout)
        print("\\x00failed", flush=True)
"""


@dataclass(frozen=True)
class Block:
    """One fenced block of ``page``: its language and text."""

    page: str
    language: str
    text: str

    @property
    def first_line(self) -> str:
        return self.text.strip().splitlines()[0]

    @property
    def header(self) -> str | None:
        """The file a Python block is headed with (``# projects/tasks.py``)."""
        match = re.fullmatch(r"# ([\w/]+\.py)", self.first_line)
        return match.group(1) if match else None


def blocks(page: str) -> list[Block]:
    """The ``python`` and ``console`` blocks of ``page`` (a path under the root), in order."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return [
        Block(page, language, body)
        for language, body in re.findall(r"```(\w+)\n(.*?)```", text, re.DOTALL)
        if language in ("python", "console")
    ]


def is_settings(code: str) -> bool:
    """Whether ``code`` only imports and assigns upper-case names: settings."""
    for node in ast.parse(code).body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        targets = getattr(node, "targets", None) or [getattr(node, "target", None)]
        if not isinstance(node, ast.Assign | ast.AugAssign) or not all(
            isinstance(t, ast.Name) and t.id.isupper() for t in targets
        ):
            return False
    return True


def for_this_django(text: str) -> str:
    """``text`` without the lines meant only for another Django version."""
    if django.VERSION < (6,):
        return text
    return "\n".join(line for line in text.splitlines() if not line.endswith(DJANGO_5_ONLY))


@dataclass
class Project:
    """A ``startproject`` in ``path``, run with the virtual environment ``venv``."""

    path: Path
    venv: Path
    apps: list[str]
    outputs: list[str] = field(default_factory=list)
    session: subprocess.Popen[str] | None = None

    @property
    def env(self) -> dict[str, str]:
        return {
            "PATH": f"{self.venv / 'bin'}:{os.environ['PATH']}",
            "HOME": str(self.path.parent),
            "DJANGO_SETTINGS_MODULE": "mysite.settings",
        }

    def run(self, *command: str) -> str:
        done = subprocess.run(
            command, cwd=self.path, env=self.env, capture_output=True, text=True, check=False
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"{shlex.join(command)}\n{output}"
        self.outputs.append(output)
        return output

    def create(self) -> None:
        self.path.mkdir()
        self.run("django-admin", "startproject", "mysite", ".")
        for app in self.apps:
            self.run("python", "manage.py", "startapp", app)

    def console(self, block: Block) -> None:
        for line in for_this_django(block.text).strip().splitlines():
            command = shlex.split(line.removeprefix("$ ").split("  #")[0])
            if command[:3] == ["python", "manage.py", "consume_claimed"]:
                if "--burst" not in command:
                    command += ["--burst", "--wait", "0"]
                if not any(arg.startswith("-v") for arg in command):
                    command += ["-v", "2"]
            self.run(*command)

    def python(self, block: Block) -> None:
        code = for_this_django(block.text)
        header = block.header
        if header is None and not is_settings(code):
            return self.execute(code, block)
        self.close_session()  # the next block imports what this one changes
        if header is None or header.endswith("settings.py"):
            target = self.path / "mysite" / "settings.py"
            apps = ", ".join(["*INSTALLED_APPS", *(repr(app) for app in self.apps)])
            code = code.replace("[...,", f"[{apps},").replace("# ...", f"{apps},")
        else:
            target = self.path / header
        previous = target.read_text(encoding="utf-8") if target.exists() else ""
        target.write_text(previous + "\n\n" + code, encoding="utf-8")
        return None

    def execute(self, code: str, block: Block) -> None:
        """Runs ``code`` in the project's shell session, started on first use."""
        if self.session is None:
            self.session = subprocess.Popen(
                ["python", "-c", _SESSION],
                cwd=self.path,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            self.execute(PLACEHOLDERS, block)
        assert self.session.stdin is not None
        assert self.session.stdout is not None
        self.session.stdin.write(json.dumps(code) + "\n")
        self.session.stdin.flush()
        lines = []
        for line in self.session.stdout:
            if line.startswith("\x00"):
                output = "".join(lines)
                self.outputs.append(output)
                assert line == "\x00ok\n", f"{block.page}: {block.first_line}\n{output}"
                return
            lines.append(line)
        raise AssertionError(f"{block.page}: the session ended at {block.first_line}\n{lines}")

    def close_session(self) -> None:
        if self.session is not None:
            assert self.session.stdin is not None
            self.session.stdin.close()
            self.session.wait()
            self.session = None
