"""Grading isolation speed: one trivial program run N times, sequentially, four ways in the
same run, so the figures are ratios against baselines measured seconds apart:

1. bare interpreter: `python3 -I main.py` (no isolation at all);
2. bare bubblewrap: `bwrap --unshare-all --die-with-parent ... python3 -I main.py` with only
   /usr and /proc bound (the floor for any bubblewrap grader);
3. isolated: the product's whole per-grading path in `apps.grading.isolation` — a fresh input
   folder, hand-over to the sandbox uid, the full sandbox (read-only root, sized tmpfs, limits,
   uid switch when root), the runner copying the files in and reporting metrics.json.

    python bench/isolation.py [--n 200]

Targets (SPEC §10 / the isolation issue): isolated runs/s >= 0.8 x bare bubblewrap runs/s, and
isolated - bare interpreter <= 10 ms per grading.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from apps.grading.isolation import BUBBLEWRAP, Limits, isolation_probe  # noqa: E402
from bench.benchlib.runs import isolated_run  # noqa: E402

PYTHON = "/usr/bin/python3"
PROGRAM = "import json\njson.dump({'score': 1}, open('metrics.json', 'w'))\n"
LIMITS = Limits(
    wall_seconds=30,
    cpu_seconds=30,
    memory_bytes=1024**3,
    file_bytes=64 * 1024**2,
    scratch_bytes=64 * 1024**2,
    processes=64,
)


def _timed(n: int, run: Callable[[], None]) -> list[float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        run()
        samples.append(time.perf_counter() - started)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=int(os.environ.get("BENCH_ISOLATION_N", 200)))
    parser.add_argument(
        "--breakdown", action="store_true", help="each piece's cost over bare bubblewrap"
    )
    args, _ = parser.parse_known_args()
    probe = isolation_probe(PYTHON)
    if probe.isolation != BUBBLEWRAP or probe.bwrap is None:
        print(f"no bubblewrap isolation here: {probe.reason}")
        return 1
    bwrap = probe.bwrap
    with tempfile.TemporaryDirectory(prefix="yoyaku-bench-iso-") as tmp:
        folder = Path(tmp)
        folder.chmod(0o755)
        (folder / "main.py").write_text(PROGRAM)
        (folder / "main.py").chmod(0o644)
        (folder / "config.yaml").write_text("a: 1\n")
        (folder / "config.yaml").chmod(0o644)

        def bare() -> None:
            subprocess.run([PYTHON, "-I", "main.py", "config.yaml"], cwd=folder, check=True)

        bare_bwrap_argv = [
            bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
            "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev",
            "--bind", str(folder), "/work", "--chdir", "/work",
            PYTHON, "-I", "main.py", "config.yaml",
        ]  # fmt: skip

        def bare_bubblewrap() -> None:
            subprocess.run(bare_bwrap_argv, check=True, env={})

        def isolated() -> None:
            outcome = isolated_run(bwrap=bwrap, program=PROGRAM, limits=LIMITS, python=PYTHON)
            if outcome.exit_code != 0 or outcome.metrics is None:
                raise RuntimeError(f"isolated run failed: {outcome}")

        if args.breakdown:
            return _breakdown(bwrap, bare_bwrap_argv[1:-4], folder, max(1, args.n // 10))
        for run in (bare, bare_bubblewrap, isolated):  # warm the page cache
            _timed(3, run)
        rounds: dict[str, list[float]] = {"bare": [], "bwrap": [], "isolated": []}
        # Interleaved in rounds of 10 so that a slow spell of the machine hits all three.
        for _ in range(max(1, args.n // 10)):
            rounds["bare"] += _timed(10, bare)
            rounds["bwrap"] += _timed(10, bare_bubblewrap)
            rounds["isolated"] += _timed(10, isolated)

    median = {name: statistics.median(samples) for name, samples in rounds.items()}
    root = "root (uid switch)" if os.geteuid() == 0 else f"uid {os.getuid()}"
    print(f"n={len(rounds['bare'])} per way, sequential, worker {root}, {PYTHON}")
    for name, label in (
        ("bare", "bare python3 -I"),
        ("bwrap", "bare bwrap + python3 -I"),
        ("isolated", "isolated grading run"),
    ):
        print(f"{label:28s} median {median[name] * 1000:6.1f} ms  {1 / median[name]:6.1f} runs/s")
    ratio = median["bwrap"] / median["isolated"]
    added = (median["isolated"] - median["bare"]) * 1000
    print(f"isolated / bare bwrap (runs/s): {ratio:6.1%}  (target >= 80 %)")
    print(f"isolation cost over bare interpreter: {added:5.1f} ms per grading  (target <= 10 ms)")
    return 0


def _breakdown(bwrap: str, base: list[str], folder: Path, rounds: int) -> int:
    from bench.benchlib.isolation_steps import breakdown

    # Every way writes metrics.json, some as the sandbox uid of a root worker (setpriv).
    (folder / "metrics.json").touch()
    (folder / "metrics.json").chmod(0o666)
    steps = breakdown(
        bwrap=bwrap, base=base, python=PYTHON, folder=folder, limits=LIMITS, rounds=rounds
    )
    print(f"n={rounds * 5} per way, interleaved; load {os.getloadavg()[0]:.1f}")
    before = steps[0][1]
    for name, median in steps:
        print(f"{name:24s} median {median * 1000:6.1f} ms  (+{(median - before) * 1000:5.1f} ms)")
        before = median
    return 0


if __name__ == "__main__":
    sys.exit(main())
