"""`yoyaku submit --parallel` against a web process whose spool share for one client address
holds one of its bodies at a time: how many runs finish, and in how long.

A real gunicorn with one worker (the product's), `MAX_REQUEST_BODY_SIZE` = `BENCH_SHARE_MB`
(12; the client's share of large bodies), on loopback, SQLite in a temporary folder unless
`DATABASE_URL` names another database. A folder of `BENCH_FILES` (16) files of
`BENCH_FILE_MB` (8) MB plus `main.py` and `config.yaml`; each of `BENCH_ROUNDS` (4) rounds is
one `yoyaku submit --parallel BENCH_PARALLEL` (8) under a key of its own, with the client's
default retry policy (Retry-After 5 s honoured, 4 attempts). `BENCH_SHARE_MB=0` leaves the
share at its default (no 503): the same upload, unhindered.

Reported per round: the exit code, the wall time and the 503s the client was answered; then
the runs that finished and the median wall time of those. The `yoyaku` run is the one on
PYTHONPATH (a work tree's `client`), so two clients compare on the same machine in turns.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.benchlib.web import web_start, web_stop  # noqa: E402
from bench.upload import MB, make_file  # noqa: E402

YOYAKU = str(ROOT / ".venv" / "bin" / "yoyaku")


def main() -> None:
    count = int(os.environ.get("BENCH_FILES", "16"))
    size = int(float(os.environ.get("BENCH_FILE_MB", "8")) * MB)
    share = int(float(os.environ.get("BENCH_SHARE_MB", "12")) * MB)
    rounds = int(os.environ.get("BENCH_ROUNDS", "4"))
    parallel = os.environ.get("BENCH_PARALLEL", "8")
    os.environ.setdefault("QUOTA_MAX_JOBS_PER_DAY", "1000")
    os.environ.setdefault("QUOTA_MAX_CONCURRENT_JOBS", "1000")
    work = Path(tempfile.mkdtemp(prefix="yoyaku-bench-busy-"))
    extra = {"MAX_REQUEST_BODY_SIZE": str(share)} if share else {}
    web = web_start(work, workers=1, timeout=300, **extra)
    try:
        folder = work / "submission"
        folder.mkdir()
        for i in range(count):
            make_file(folder / f"part{i:02d}.py", size)
        (folder / "main.py").write_text("print('bench')\n")
        (folder / "config.yaml").write_text("bench: true\n")
        finished: list[float] = []
        for index in range(rounds):
            env = {
                **os.environ,
                "YOYAKU_URL": f"http://127.0.0.1:{web.port}",
                "YOYAKU_TOKEN": web.token,
                "YOYAKU_CONFIG_DIR": str(work / f"config-{index}"),
            }
            started = time.perf_counter()
            key = f"busy-{index}-{os.getpid()}"
            done = subprocess.run(
                [
                    YOYAKU,
                    "submit",
                    str(folder),
                    "--json",
                    "--parallel",
                    parallel,
                    "--idempotency-key",
                    key,
                ],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            wall = time.perf_counter() - started
            busy = done.stderr.count(": 503 ")
            print(f"round {index}: exit {done.returncode}, {wall:.2f} s, {busy} answers 503")
            if done.returncode == 0:
                finished.append(wall)
            for child in (work / "media").iterdir():
                shutil.rmtree(child, ignore_errors=True)
        median = f"{statistics.median(finished):.2f} s" if finished else "-"
        room = f"share {share / MB:.0f} MB" if share else "default share"
        print(f"{count} x {size / MB:.0f} MB, --parallel {parallel}, {room}")
        print(f"finished {len(finished)}/{rounds}; median wall of those {median}")
    finally:
        web_stop(web.process)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
