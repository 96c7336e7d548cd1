"""The allowed dependencies between apps, read from the source (every `import`, also inside
functions), so that a cycle such as quotas ↔ jobs cannot come back unnoticed."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

APPS = Path(__file__).resolve().parent.parent / "apps"

# app -> the apps it may import. The graph must stay acyclic: an app's services, selectors and
# exceptions may be used by the apps listed against it, never the other way round.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "quotas": {"core"},
    "submissions": {"core", "quotas"},
    "schedule": {"core", "quotas"},
    # Jobs admit slots (jobs + reservations) and report usage (stored bytes, lives).
    "jobs": {"core", "quotas", "submissions", "schedule"},
    "grading": {"core", "jobs", "submissions", "quotas"},
    "review": {"core", "jobs", "submissions", "grading"},
    # Benchmarks sit above everything they will use; nothing below imports them.
    "benchmarks": {"core", "submissions", "jobs", "quotas", "grading", "schedule"},
}


def _imported_apps(path: Path) -> Iterator[tuple[str, int]]:
    """(app, line) for every absolute import of `apps.<app>` in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
            if node.module == "apps":
                modules = [f"apps.{alias.name}" for alias in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if len(parts) >= 2 and parts[0] == "apps":
                yield parts[1], node.lineno


def _app_imports(app: str) -> dict[str, list[str]]:
    """other app -> ["file:line", ...] for every import of it in `app`'s source."""
    found: dict[str, list[str]] = {}
    for path in sorted((APPS / app).rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for other, line in _imported_apps(path):
            if other != app:
                found.setdefault(other, []).append(f"{path.relative_to(APPS.parent)}:{line}")
    return found


def _apps_on_disk() -> list[str]:
    return sorted(p.parent.name for p in APPS.glob("*/apps.py"))


def test_every_app_has_an_entry_in_the_allowed_dependencies() -> None:
    missing = [app for app in _apps_on_disk() if app not in ALLOWED]
    assert not missing, f"add the allowed dependencies of {missing} to ALLOWED"


def test_the_allowed_dependencies_have_no_cycle() -> None:
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(app: str, path: list[str]) -> None:
        assert app not in visiting, f"cycle: {' -> '.join([*path, app])}"
        if app in done:
            return
        visiting.add(app)
        for other in sorted(ALLOWED.get(app, set())):
            visit(other, [*path, app])
        visiting.discard(app)
        done.add(app)

    for app in ALLOWED:
        visit(app, [])


@pytest.mark.parametrize("app", _apps_on_disk())
def test_an_app_imports_only_the_apps_it_may_depend_on(app: str) -> None:
    forbidden = {
        other: where
        for other, where in _app_imports(app).items()
        if other not in ALLOWED.get(app, set())
    }
    assert not forbidden, f"apps.{app} imports apps it must not depend on: {forbidden}"


def test_quotas_never_import_the_jobs_app() -> None:
    assert "jobs" not in _app_imports("quotas")


def test_the_checker_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text("def f():\n    from apps.jobs.models import Job\n    import apps.review\n")

    assert sorted(_imported_apps(source)) == [("jobs", 2), ("review", 3)]
