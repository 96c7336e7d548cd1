"""Modules a reader can hold in their head: no Python file of the platform, its client, its
settings or its benchmarks passes 450 lines (migrations aside, which Django writes). Past ~400
lines a module is split along the seams it already has (`apps/submissions/services/`,
`apps/schedule/execution/`, `client/yoyaku_client/cli/`, `bench/chaoslib/`)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 450
CHECKED = ("apps", "client/yoyaku_client", "config", "bench")


def oversized(root: Path, limit: int = LIMIT) -> list[tuple[str, int]]:
    """(path, lines) of every Python file under `root` longer than `limit`, migrations aside."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found.append((str(path.relative_to(root)), lines))
    return found


@pytest.mark.parametrize("folder", CHECKED)
def test_no_module_passes_the_line_limit(folder: str) -> None:
    assert oversized(ROOT / folder) == []


def test_the_check_finds_a_long_module_and_skips_migrations(tmp_path: Path) -> None:
    (tmp_path / "app" / "migrations").mkdir(parents=True)
    (tmp_path / "app" / "long.py").write_text("x = 1\n" * (LIMIT + 1), encoding="utf-8")
    (tmp_path / "app" / "short.py").write_text("x = 1\n" * LIMIT, encoding="utf-8")
    (tmp_path / "app" / "migrations" / "0001.py").write_text("x = 1\n" * 999, encoding="utf-8")
    assert oversized(tmp_path) == [("app/long.py", LIMIT + 1)]
