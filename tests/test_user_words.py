"""What users read speaks of the product, not of how it was specified: no "SPEC §3", no
"(seed 000)" in the docs, the pages, the client (its help and its SDK's docstrings), the
example scripts, the alert rules, or the API schema."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parents[1]
INTERNAL = re.compile(r"\bSPEC\b|\bseed 00\d\b|\bseed's\b|\(seed\)|\bseeds/", re.IGNORECASE)
# docs/decisions.md records the design decisions against the contract the code was built to.
READ_BY_USERS = [
    ROOT / "README.md",
    *(p for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "decisions.md"),
    *sorted((ROOT / "templates").rglob("*.html")),
    *sorted((ROOT / "static").rglob("*.js")),
    *sorted((ROOT / "client").rglob("*.py")),
    *sorted((ROOT / "client").rglob("*.md")),
    *sorted((ROOT / "examples").rglob("*.sh")),
    *sorted((ROOT / "deploy").rglob("*.yml")),
]


def _hits(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if INTERNAL.search(line)]


@pytest.mark.parametrize("path", READ_BY_USERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_file_users_read_speaks_of_the_spec_or_its_seeds(path: Path) -> None:
    assert _hits(path.read_text(errors="replace")) == []


def test_no_help_of_the_cli_speaks_of_the_spec_or_its_seeds() -> None:
    yoyaku = Path(sys.executable).parent / "yoyaku"
    commands = [[], *([c] for c in ("login", "whoami", "submit", "jobs", "job", "logs"))]
    commands += [[c] for c in ("cancel", "quota", "reserve", "release", "leaderboard")]
    commands += [["review"], ["schedule"], ["schedule", "book"]]
    for command in commands:
        done = subprocess.run(
            [str(yoyaku), *command, "--help"], capture_output=True, text=True, check=True
        )
        assert _hits(done.stdout) == [], command


@pytest.mark.django_db
def test_the_api_schema_does_not_speak_of_the_spec_or_its_seeds() -> None:
    schema = Client().get("/api/schema/?format=json").content.decode()
    assert _hits(schema) == []
