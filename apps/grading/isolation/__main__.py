"""`python -m apps.grading.isolation probe|run`: what this host can isolate, and one program run
exactly as a worker would run it (no Django needed).

    python -m apps.grading.isolation probe [--python /usr/bin/python3]
    python -m apps.grading.isolation run --files DIR [--python P] [--isolation bubblewrap]
        [--limits '{"wall_seconds": 10, ...}'] [--mount /data=HOST_DIR ...] [--output /scores]
        [--result /scores/scores.json] [--env NAME=VALUE ...] [--collect HOST_DIR]
        -- main.py config.yaml

Both print one JSON object.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

from apps.grading.isolation.limits import Limits
from apps.grading.isolation.probe import isolation_probe
from apps.grading.isolation.run import BUBBLEWRAP, METRICS_FILE, run_program
from apps.grading.isolation.scratch import input_folder, input_folder_hand_over

DEFAULT_LIMITS = Limits(
    wall_seconds=60,
    cpu_seconds=60,
    memory_bytes=1024**3,
    file_bytes=256 * 1024**2,
    scratch_bytes=256 * 1024**2,
    processes=64,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m apps.grading.isolation")
    parser.add_argument("command", choices=["probe", "run"])
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--readonly", action="append", default=[], help="extra read-only folder")
    parser.add_argument("--files", type=Path, help="run: the submission's files")
    parser.add_argument("--isolation", default=BUBBLEWRAP)
    parser.add_argument("--limits", default="{}", help="run: JSON overrides of the limits")
    parser.add_argument("--mount", action="append", default=[], help="run: INSIDE=HOST, read-only")
    parser.add_argument("--output", default="", help="run: the stage's writable output folder")
    parser.add_argument("--result", default=METRICS_FILE, help="run: the file reported back")
    parser.add_argument("--env", action="append", default=[], help="run: NAME=VALUE")
    parser.add_argument("--collect", type=Path, help="run: receives the output folder")
    parser.add_argument(
        "--readonly-work", action="store_true", help="run: the working folder is read-only"
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    program = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    probe = isolation_probe(args.python, tuple(args.readonly))
    if args.command == "probe":
        print(json.dumps(asdict(probe)))  # noqa: T201 - the command's output
        return 0 if probe.isolation == BUBBLEWRAP else 1
    if args.files is None or not program:
        parser.error("run needs --files and the program's arguments")
    limits = Limits(**{**DEFAULT_LIMITS.as_dict(), **json.loads(args.limits)})
    with input_folder() as folder:
        shutil.copytree(args.files, folder, dirs_exist_ok=True)
        input_folder_hand_over(folder, isolation=args.isolation)
        outcome = run_program(
            isolation=args.isolation,
            bwrap=probe.bwrap,
            input_dir=folder,
            program=program,
            limits=limits,
            python=args.python,
            readonly_paths=tuple(args.readonly),
            mounts={inside: Path(host) for inside, _, host in _pairs(args.mount)},
            output=args.output,
            result=args.result,
            environment={name: value for name, _, value in _pairs(args.env)},
            collect=args.collect,
            readonly_work=args.readonly_work,
        )
    body = asdict(outcome)
    body["metrics"] = (
        None if outcome.metrics is None else outcome.metrics.decode("utf-8", "replace")
    )
    print(json.dumps(body))  # noqa: T201 - the command's output
    return 0


def _pairs(values: list[str]) -> list[tuple[str, str, str]]:
    return [value.partition("=") for value in values]


if __name__ == "__main__":
    sys.exit(main())
