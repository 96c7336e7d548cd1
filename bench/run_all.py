"""Run every benchmark script in bench/, each in its own interpreter, one after another.

Output is shown and also written to bench/results/<script>.txt. Plain arguments name the
scripts to run (`submit`, `upload`, ...); arguments starting with `-` are passed to each script
that runs (so name one script when passing its own options). `chaos.py` runs only when named:
it is `make chaos`, and it restarts the PostgreSQL and Redis it is pointed at.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Scripts `make bench` runs only when named (`make bench BENCH=chaos`).
NAMED_ONLY = {"chaos"}


def main() -> int:
    scripts = sorted(p for p in HERE.glob("*.py") if p.name not in {"run_all.py", "__init__.py"})
    only = {arg for arg in sys.argv[1:] if not arg.startswith("-")}
    flags = [arg for arg in sys.argv[1:] if arg.startswith("-")]
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    failed: list[str] = []
    for script in scripts:
        if (only and script.stem not in only) or (not only and script.stem in NAMED_ONLY):
            continue
        print(f"== {script.name}", flush=True)
        with (results / f"{script.stem}.txt").open("w") as log:
            process = subprocess.Popen(
                [sys.executable, str(script), *flags],
                cwd=HERE.parent,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            assert process.stdout is not None
            for line in process.stdout:
                sys.stdout.write(line)
                log.write(line)
            if process.wait() != 0:
                failed.append(script.name)
    if failed:
        print("failed: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
