"""A phase submission's two stages run by a worker whose uid is not root (the isolation
package's own command as that uid, as `tests/grading/workers.py` runs one stage): the code
phase's program with the input data at `/data`, its working folder read-only and the
reference data nowhere; then the example's scoring program on what it left in `/output`,
with the reference data at `/reference`: the exact scores come out."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.benchmarks.bundles import EXAMPLE
from tests.benchmarks.scoring import perfect_program
from tests.grading.workers import ROOT, UNPRIVILEGED_UID

PROBE = """
import os
for where in ("/reference", "/scores", "/predictions", "main.py.copy"):
    try:
        if where.endswith(".copy"):
            open(where, "w").write("x")
            print("wrote", where)
        else:
            print("sees", where, os.listdir(where))
    except OSError as exc:
        print("refused", where, type(exc).__name__)
"""


def _readable_copy(source: Path, parent: Path, name: str) -> Path:
    target = parent / name
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


@pytest.fixture
def workspace() -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("switching to another uid needs root")
    folder = Path(tempfile.mkdtemp(prefix="yoyaku-test-phase-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _stage(files: Path, *options: str, program: list[str]) -> dict[str, Any]:
    completed = subprocess.run(
        [
            "/usr/bin/python3",
            "-m",
            "apps.grading.isolation",
            "run",
            f"--files={files}",
            *options,
            "--",
            *program,
        ],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
        user=UNPRIVILEGED_UID,
        group=UNPRIVILEGED_UID,
        extra_groups=[],
        capture_output=True,
        timeout=60,
        check=True,
    )
    outcome: dict[str, Any] = json.loads(completed.stdout)
    return outcome


def test_an_unprivileged_worker_runs_both_stages_of_a_code_phase(workspace: Path) -> None:
    data = _readable_copy(EXAMPLE / "data" / "inputs", workspace, "inputs")
    reference = _readable_copy(EXAMPLE / "data" / "ref", workspace, "ref")
    scorer = _readable_copy(EXAMPLE / "scoring", workspace, "scoring")
    program = workspace / "program"
    program.mkdir(mode=0o755)
    for name, body in perfect_program().items():
        (program / name).write_bytes(body + (PROBE.encode() if name == "main.py" else b""))
        (program / name).chmod(0o644)
    predictions = workspace / "predictions"
    predictions.mkdir()
    os.chown(predictions, UNPRIVILEGED_UID, UNPRIVILEGED_UID)

    run = _stage(
        program,
        f"--mount=/data={data}",
        "--output=/output",
        f"--collect={predictions}",
        "--readonly-work",
        program=["main.py", "config.yaml"],
    )

    assert run["exit_code"] == 0, run
    assert "predicted 30 rows" in run["logs"]
    for where in ("/reference", "/scores", "/predictions"):
        assert f"refused {where} FileNotFoundError" in run["logs"]
    assert "wrote main.py.copy" not in run["logs"]
    assert (predictions / "predictions.csv").is_file()

    score = _stage(
        scorer,
        f"--mount=/predictions={predictions}",
        f"--mount=/reference={reference}",
        "--output=/scores",
        "--result=/scores/scores.json",
        program=["score.py"],
    )

    assert score["exit_code"] == 0, score
    assert json.loads(score["metrics"]) == {
        "public": {"accuracy": 1.0, "errors": 0.0},
        "private": {"accuracy": 1.0, "errors": 0.0},
    }
