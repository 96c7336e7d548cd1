"""Grading isolation speed: one trivial program run N times, sequentially, four ways in the
same run, so the figures are ratios against baselines measured seconds apart:

1. bare interpreter: `python3 -I main.py` (no isolation at all);
2. bare bubblewrap: `bwrap --unshare-all --die-with-parent ... python3 -I main.py` with only
   /usr and /proc bound (the floor for any bubblewrap grader);
3. isolated: the product's whole per-grading path in `apps.grading.isolation` — a fresh input
   folder, hand-over to the sandbox uid, the full sandbox (read-only root, sized tmpfs, limits,
   uid switch when root), the runner copying the files in and reporting metrics.json;
4. the same with the shell runner (`/bin/sh` + `prlimit` inside, `setpriv` for a root worker),
   which a host without a C compiler uses, when the compiled runner is in use here.

Each way's median wall time and CPU time (user + system of this process and of every process
it started, the sandbox's included, per run: far less sensitive to other load on the machine
than the wall clock) is printed.

    python bench/isolation.py [--n 200]

Targets (SPEC §10 / the isolation issue): isolated runs/s >= 0.8 x bare bubblewrap runs/s, and
isolated - bare interpreter <= 10 ms per grading.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from apps.grading.isolation import BUBBLEWRAP, Limits, isolation_probe  # noqa: E402
from apps.grading.isolation import run as isolation_run  # noqa: E402
from apps.grading.isolation.runner import runner_binary  # noqa: E402
from bench.benchlib.isolation_steps import cpu_accounting, timed  # noqa: E402
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


def _timed(n: int, run: Callable[[], None]) -> list[tuple[float, float]]:
    """(wall, cpu) seconds of each of `n` runs."""
    return [timed(run) for _ in range(n)]


@contextlib.contextmanager
def _shell_runner() -> Iterator[None]:
    """Runs as on a host without a C compiler: the shell runner, prlimit and setpriv."""
    compiled = getattr(isolation_run, "runner_binary")  # noqa: B009 - swapped back below
    setattr(isolation_run, "runner_binary", lambda: None)  # noqa: B010
    try:
        yield
    finally:
        setattr(isolation_run, "runner_binary", compiled)  # noqa: B010


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=int(os.environ.get("BENCH_ISOLATION_N", 200)))
    parser.add_argument(
        "--breakdown", action="store_true", help="each piece's cost over bare bubblewrap"
    )
    args, _ = parser.parse_known_args()
    cpu_accounting()
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

        def isolated_shell() -> None:
            with _shell_runner():
                isolated()

        if args.breakdown:
            return _breakdown(bwrap, bare_bwrap_argv[1:-4], folder, max(1, args.n // 10))
        ways = {"bare": bare, "bwrap": bare_bubblewrap, "isolated": isolated}
        if runner_binary() is not None:
            ways["shell"] = isolated_shell
        for run in ways.values():  # warm the page cache
            _timed(3, run)
        rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
        # Interleaved in rounds of 10 so that a slow spell of the machine hits every way.
        for _ in range(max(1, args.n // 10)):
            for name, run in ways.items():
                rounds[name] += _timed(10, run)
    _print(rounds)
    return 0


def _print(rounds: dict[str, list[tuple[float, float]]]) -> None:
    median = {name: statistics.median(w for w, _ in samples) for name, samples in rounds.items()}
    cpu = {name: statistics.median(c for _, c in samples) for name, samples in rounds.items()}
    root = "root (uid switch)" if os.geteuid() == 0 else f"uid {os.getuid()}"
    print(f"n={len(rounds['bare'])} per way, sequential, worker {root}, {PYTHON}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name, label in (
        ("bare", "bare python3 -I"),
        ("bwrap", "bare bwrap + python3 -I"),
        ("isolated", "isolated grading run"),
        ("shell", "isolated, shell runner"),
    ):
        if name in median:
            print(
                f"{label:28s} median {median[name] * 1000:6.1f} ms  {1 / median[name]:6.1f} "
                f"runs/s  cpu {cpu[name] * 1000:6.1f} ms"
            )
    ratio = median["bwrap"] / median["isolated"]
    added = (median["isolated"] - median["bare"]) * 1000
    print(f"isolated / bare bwrap (runs/s): {ratio:6.1%}  (target >= 80 %)")
    print(f"isolation cost over bare interpreter: {added:5.1f} ms per grading  (target <= 10 ms)")
    cpu_ratio = cpu["bwrap"] / cpu["isolated"]
    cpu_added = (cpu["isolated"] - cpu["bare"]) * 1000
    print(f"cpu: isolated / bare bwrap {cpu_ratio:6.1%}, over bare interpreter {cpu_added:5.1f} ms")
    if "shell" in median:
        saved = (median["shell"] - median["isolated"]) * 1000
        cpu_saved = (cpu["shell"] - cpu["isolated"]) * 1000
        print(f"compiled runner saves {saved:5.1f} ms wall, {cpu_saved:5.1f} ms cpu per grading")


def _breakdown(bwrap: str, base: list[str], folder: Path, rounds: int) -> int:
    from bench.benchlib.isolation_steps import breakdown

    # Every way writes metrics.json, some as the sandbox uid of a root worker (setpriv).
    (folder / "metrics.json").touch()
    (folder / "metrics.json").chmod(0o666)
    steps = breakdown(
        bwrap=bwrap, base=base, python=PYTHON, folder=folder, limits=LIMITS, rounds=rounds
    )
    print(f"n={rounds * 5} per way, interleaved; load {os.getloadavg()[0]:.1f}")
    before, before_cpu = steps[0][1], steps[0][2]
    for name, median, cpu in steps:
        print(
            f"{name:24s} median {median * 1000:6.1f} ms  (+{(median - before) * 1000:5.1f} ms)"
            f"  cpu {cpu * 1000:6.1f} ms  (+{(cpu - before_cpu) * 1000:5.1f} ms)"
        )
        before, before_cpu = median, cpu
    return 0


if __name__ == "__main__":
    sys.exit(main())
