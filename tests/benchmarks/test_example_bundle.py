"""The example bundle is a real one: its scoring program, run in a bubblewrap sandbox with the
mounts SPEC §11.2 names, scores its baseline on every declared metric and split, and judges
unusable predictions invalid."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.benchmarks.bundles import EXAMPLE, example_manifest

BWRAP = shutil.which("bwrap")
pytestmark = pytest.mark.skipif(BWRAP is None, reason="bubblewrap is not installed")


def _score(predictions: Path, scores: Path) -> dict[str, object]:
    assert BWRAP is not None
    argv = [
        BWRAP,
        *("--ro-bind", "/usr", "/usr"),
        *("--symlink", "usr/bin", "/bin"),
        *("--symlink", "usr/lib", "/lib"),
        *("--symlink", "usr/lib64", "/lib64"),
        *("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"),  # noqa: S108 - inside the sandbox
        *("--ro-bind", str(predictions), "/predictions"),
        *("--ro-bind", str(EXAMPLE / "data" / "ref"), "/reference"),
        *("--bind", str(scores), "/scores"),
        *("--ro-bind", str(EXAMPLE / "scoring"), "/scoring"),
        *("--chdir", "/scoring", "--unshare-all", "--die-with-parent"),
        *("/usr/bin/python3", "-I", "score.py"),
    ]
    subprocess.run(argv, check=True, timeout=60, capture_output=True)
    loaded: dict[str, object] = json.loads((scores / "scores.json").read_text())
    return loaded


def test_the_scorer_scores_the_baseline_on_every_metric_of_every_split(tmp_path: Path) -> None:
    scores = _score(EXAMPLE / "baselines" / "majority", tmp_path)

    phase = example_manifest()["phases"][0]
    keys = {metric["key"] for metric in phase["metrics"]}
    assert set(scores) == set(phase["splits"])
    for split in phase["splits"]:
        values = scores[split]
        assert isinstance(values, dict)
        assert set(values) == keys
        assert all(math.isfinite(value) for value in values.values())


def test_the_scorer_judges_missing_predictions_invalid(tmp_path: Path) -> None:
    empty = tmp_path / "predictions"
    empty.mkdir()
    out = tmp_path / "scores"
    out.mkdir()

    assert _score(empty, out) == {"invalid": "no predictions.csv found"}
