"""What `yoyaku` costs before it does anything: its start-up, checkout against checkout.

Each checkout's `client/` is put first on `PYTHONPATH` and three runs of the console
script's code (`yoyaku_client.cli.main` with `sys.argv` set) are timed from the spawn of
the process to its end:

- `help`: `yoyaku --help`;
- `submit-help`: `yoyaku submit --help`;
- `submit`: `yoyaku submit examples/hello --idempotency-key K` to a loopback address, ended
  (`os._exit`) by an audit hook at its first `socket.connect`: the start-up of a submission
  up to its first request (the imports, the options, the files collected and checked, the
  hashing and the request threads started).

The checkouts take turns run by run (A, B, A, B...), so a busy machine slows them alike;
each figure is given as min / median / max over `--runs` runs, with the load average before
and after. With `--instructions`, each run is also counted under `valgrind --tool=callgrind`
(instructions executed, the same from run to run within a few thousand), alternated the
same way.

    python bench/client_startup.py --tree /work/wt/base --tree . --runs 9 [--instructions]

Without `--tree`, this checkout alone (what `make bench` runs).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = str(ROOT / ".venv" / "bin" / "python")
#: Nothing listens there: the hook ends the process before the connection is tried.
URL = "http://127.0.0.1:9"

RUN = (
    "import sys\nfrom yoyaku_client.cli import main\nsys.argv = ['yoyaku', *sys.argv[1:]]\nmain()\n"
)
FIRST_REQUEST = (
    "import os, sys\n"
    "def hook(event, args):\n"
    "    if event == 'socket.connect':\n"
    "        os._exit(0)\n"
    "sys.addaudithook(hook)\n" + RUN
)
COMMANDS: dict[str, tuple[str, list[str]]] = {
    "help": (RUN, ["--help"]),
    "submit-help": (RUN, ["submit", "--help"]),
    "submit": (
        FIRST_REQUEST,
        ["submit", str(ROOT / "examples" / "hello"), "--idempotency-key", "bench-start-up"],
    ),
}


def environment(tree: Path, config_dir: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(tree / "client"),
        "PYTHONHASHSEED": "0",
        "YOYAKU_URL": URL,
        "YOYAKU_TOKEN": "t",
        "YOYAKU_RETRIES": "0",
        "YOYAKU_CONFIG_DIR": config_dir,
        "COLUMNS": "100",
    }


def wall(code: str, args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [PYTHON, "-c", code, *args], env=env, capture_output=True, check=False, cwd=ROOT
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{args} failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    return elapsed


def instructions(code: str, args: list[str], env: dict[str, str]) -> int:
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            PYTHON,
            "-c",
            code,
            *args,
        ],
        env=env,
        capture_output=True,
        check=False,
        cwd=ROOT,
    )
    found = re.search(rb"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{args} under valgrind failed: {done.stderr.decode()[-2000:]}")
    return int(found.group(1))


def spread(values: list[float], scale: float, unit: str) -> str:
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{low * scale:.1f} / {mid * scale:.1f} / {high * scale:.1f} {unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tree", action="append", type=Path, help="a checkout (default: this one); repeat"
    )
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--instructions", action="store_true")
    options = parser.parse_args()
    trees = [tree.resolve() for tree in options.tree or [Path(__file__).resolve().parent.parent]]
    print(f"load before: {os.getloadavg()[0]:.2f}")
    walls: dict[tuple[str, Path], list[float]] = {}
    counts: dict[tuple[str, Path], list[float]] = {}
    with tempfile.TemporaryDirectory() as config_dir:
        for name, (code, args) in COMMANDS.items():
            for tree in trees:  # one unmeasured run each: the bytecode caches written
                wall(code, args, environment(tree, config_dir))
            for _ in range(options.runs):
                for tree in trees:
                    env = environment(tree, config_dir)
                    walls.setdefault((name, tree), []).append(wall(code, args, env))
            if options.instructions:
                for _ in range(options.runs):
                    for tree in trees:
                        env = environment(tree, config_dir)
                        counts.setdefault((name, tree), []).append(instructions(code, args, env))
    print(f"load after: {os.getloadavg()[0]:.2f}")
    print(f"{options.runs} runs each, min / median / max")
    for name in COMMANDS:
        for tree in trees:
            line = f"{name:12} {tree}: wall {spread(walls[name, tree], 1e3, 'ms')}"
            if options.instructions:
                line += f", instructions {spread(counts[name, tree], 1e-6, 'M')}"
            print(line)


if __name__ == "__main__":
    main()
