"""Two-stage grading speed: a small code-phase submission graded the phase's way (run stage,
its output collected, score stage with the scoring program and reference data from the
worker's bundle cache; `apps.grading.phase_grader.phase_grade`) against one isolated run of
the same program (`apps.grading.isolation.run_program`, as `bench/isolation.py` measures it),
interleaved in one run so that the figure is a ratio of runs seconds apart.

    python bench/two_stage.py [--n 60]

No database: the grading path from the prepared submission folder to its `GradingResult`.
The bundle lies in a temporary media folder and is extracted into the cache once, as on a
worker that already scored this phase. Target: two-stage / one run <= 2.2x (median).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WORKDIR = Path(tempfile.mkdtemp(prefix="yoyaku-bench-two-stage-"))
# The sandbox uid reaches the bundle cache through it (as through /tmp on a worker).
WORKDIR.chmod(0o711)
os.environ.update(
    DJANGO_SETTINGS_MODULE="config.settings",
    DEBUG="true",
    MEDIA_ROOT=str(WORKDIR / "media"),
    GRADING_BUNDLE_CACHE=str(WORKDIR / "cache"),
    DATABASE_URL=f"sqlite:///{WORKDIR / 'unused.sqlite3'}",
    LOG_LEVEL="WARNING",
)

import django  # noqa: E402

django.setup()

from django.core.files.base import ContentFile  # noqa: E402
from django.core.files.storage import default_storage  # noqa: E402

from apps.grading.grader import grading_isolation, grading_limits, stage_backend  # noqa: E402
from apps.grading.isolation import (  # noqa: E402
    BUBBLEWRAP,
    input_folder,
    input_folder_hand_over,
    run_program,
)
from apps.grading.phase_grader import phase_grade  # noqa: E402
from apps.grading.phases import BundleFolder, ScoringPlan  # noqa: E402

EXAMPLE = ROOT / "examples" / "benchmarks" / "digits"
# Reads the input data, writes predictions: to /output in a phase, else beside itself.
PROGRAM = """
import csv, os
out = "/output" if os.path.isdir("/output") else "."
source = "/data/test.csv" if os.path.isdir("/data") else "test.csv"
with open(source, newline="") as handle:
    ids = [row["id"] for row in csv.DictReader(handle)]
with open(os.path.join(out, "predictions.csv"), "w") as target:
    target.write("id,label\\n" + "".join(f"{key},1\\n" for key in ids))
open("metrics.json", "w").write('{"score": 1}') if out == "." else None
"""


def _bundle() -> str:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(EXAMPLE.rglob("*")):
            if path.is_file():
                archive.writestr(path.relative_to(EXAMPLE).as_posix(), path.read_bytes())
    return default_storage.save("bundles/bench/bundle.zip", ContentFile(buffer.getvalue()))


def _timed(n: int, run: Callable[[], None]) -> list[float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        run()
        samples.append(time.perf_counter() - started)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=int(os.environ.get("BENCH_TWO_STAGE_N", 60)))
    args, _ = parser.parse_known_args()
    isolation = grading_isolation()
    if isolation.isolation != BUBBLEWRAP or isolation.bwrap is None:
        print(f"no bubblewrap isolation here: {isolation.reason}")
        return 1
    stored = _bundle()
    plan = ScoringPlan(
        kind="code",
        version=1,
        scoring_program=BundleFolder(stored, "scoring/", "bench"),
        scoring_entrypoint="score.py",
        reference_data=BundleFolder(stored, "data/ref/", "bench"),
        splits=("public", "private"),
        metrics=("accuracy", "errors"),
        input_data=BundleFolder(stored, "data/inputs/", "bench"),
    )
    backend = stage_backend(isolation)
    limits = grading_limits()
    test_csv = (EXAMPLE / "data/inputs/test.csv").read_text()

    def two_stage() -> None:
        with input_folder() as root:
            (root / "main.py").write_text(PROGRAM)
            (root / "config.yaml").write_text("a: 1\n")
            result = phase_grade(
                plan,
                root=root,
                entrypoint="main.py",
                config_file="config.yaml",
                backend=backend,
                limits=limits,
                on_output=None,
            )
        if result.outcome != "completed":
            raise RuntimeError(f"two-stage grading failed: {result}")

    def one_run() -> None:
        with input_folder() as root:
            (root / "main.py").write_text(PROGRAM)
            (root / "config.yaml").write_text("a: 1\n")
            (root / "test.csv").write_text(test_csv)
            input_folder_hand_over(root, isolation=BUBBLEWRAP)
            outcome = run_program(
                isolation=BUBBLEWRAP,
                bwrap=isolation.bwrap,
                input_dir=root,
                program=["main.py", "config.yaml"],
                limits=limits,
                python=str(backend.python),  # type: ignore[attr-defined]
            )
        if outcome.exit_code != 0 or outcome.metrics is None:
            raise RuntimeError(f"isolated run failed: {outcome}")

    for run in (one_run, two_stage):  # warm the page cache and the bundle cache
        _timed(3, run)
    rounds: dict[str, list[float]] = {"one": [], "two": []}
    for _ in range(max(1, args.n // 10)):  # interleaved: a slow spell hits both
        rounds["one"] += _timed(10, one_run)
        rounds["two"] += _timed(10, two_stage)
    worker = "root (uid switch)" if os.geteuid() == 0 else f"uid {os.getuid()}"
    print(f"n={len(rounds['one'])} per way, sequential, worker {worker}")
    for name, label in (("one", "one isolated run"), ("two", "two-stage grading")):
        samples = rounds[name]
        print(
            f"{label:20s} min {min(samples) * 1000:6.1f}  median "
            f"{statistics.median(samples) * 1000:6.1f}  max {max(samples) * 1000:6.1f} ms"
        )
    ratios = [two / one for one, two in zip(rounds["one"], rounds["two"], strict=True)]
    median = statistics.median(rounds["two"]) / statistics.median(rounds["one"])
    print(
        f"two-stage / one run: median {median:.2f}x  (pairwise min {min(ratios):.2f}x, "
        f"median {statistics.median(ratios):.2f}x, max {max(ratios):.2f}x; target <= 2.2x)"
    )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        import shutil

        shutil.rmtree(WORKDIR, ignore_errors=True)
