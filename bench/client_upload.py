"""The `yoyaku` client's upload throughput against curl's, in the same run.

A real gunicorn (5 sync workers, SQLite in a temporary folder unless `DATABASE_URL` names
another database) on loopback; a folder of `BENCH_FILES` (10) files of `BENCH_FILE_MB` (100)
MB each, plus `main.py` and `config.yaml`. Each round uploads the whole folder and creates
one job, alternately:

- curl: one `curl -F` per file (the first creates the draft, then one request per file), then
  `POST /api/jobs/`; `Expect:` is disabled so curl never waits for a `100 Continue`. This is
  the baseline: no checksums, no state, nothing but the requests, one at a time;
- curl + sha256sum: the same, each file first hashed by `sha256sum` and sent with
  `X-Content-SHA256` (what the client does);
- curl, 2 at a time: the baseline's requests with the files after the first two at a time
  (the next curl starts when one ends), as `yoyaku submit` sends them by default;
- the CLI: `yoyaku submit DIR --progress --idempotency-key bench-N` with the progress bars
  drawn (for a terminal, into a file): hashing, the key lookup, the state file, the uploads
  with `X-Content-SHA256` two at a time, the job. With an explicit key (CI's way) the files
  are hashed one ahead of the upload;
- the CLI with `--parallel 1`: one file after the other, as the baseline sends them;
- the CLI with the key it derives from the files' hashes (a `--metadata` per round makes it
  new): every file is hashed before the first request.

Reported: each way's median throughput, the median CPU seconds its client processes used
(curl and sha256sum, or yoyaku) over `BENCH_ROUNDS` (5) rounds, and the client's
ratio to curl (target ≥ 0.9), to curl at the same number of files at once, and one file at a
time to the baseline, plus the client's peak RSS. The ways take turns in
each round, so a busy machine slows them alike.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.upload import MB, make_file, start_server  # noqa: E402

YOYAKU = str(ROOT / ".venv" / "bin" / "yoyaku")
CURL = shutil.which("curl") or "curl"


def children_cpu() -> float:
    """CPU seconds (user + system) of every finished child process so far: the clients."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def curl(args: list[str]) -> dict[str, object]:
    done = subprocess.run(
        [CURL, "-sS", "--fail-with-body", "-H", "Expect:", *args],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"curl failed: {done.stdout[-500:]!r} {done.stderr[-500:]!r}")
    result: dict[str, object] = json.loads(done.stdout)
    return result


def curl_async(args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [CURL, "-sS", "--fail-with-body", "-H", "Expect:", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def curl_waited(process: subprocess.Popen[bytes]) -> None:
    out, err = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"curl failed: {out[-500:]!r} {err[-500:]!r}")


def curl_files_at_once(args: list[list[str]], at_once: int) -> None:
    """One curl per `args`, `at_once` under way: the next starts as soon as one ends."""
    running: list[subprocess.Popen[bytes]] = []
    for one in args:
        while len(running) >= at_once:
            ended = [p for p in running if p.poll() is not None]
            for process in ended:
                curl_waited(process)
                running.remove(process)
            if not ended:
                time.sleep(0.001)
        running.append(curl_async(one))
    for process in running:
        curl_waited(process)


def curl_round(
    base: str, token: str, files: list[Path], *, checksums: bool, at_once: int = 1
) -> None:
    auth = ["-H", f"Authorization: Bearer {token}"]

    def checksum(path: Path) -> list[str]:
        if not checksums:
            return []
        digest = subprocess.run(
            ["sha256sum", str(path)], capture_output=True, text=True, check=True
        ).stdout.split()[0]
        return ["-H", f"X-Content-SHA256: {digest}"]

    first, rest = files[0], files[1:]
    created = curl([*auth, *checksum(first), "-F", f"files=@{first}", f"{base}/api/submissions/"])
    submission = created["submission_id"]
    curl_files_at_once(
        [
            [
                *auth,
                *checksum(path),
                "-F",
                f"file=@{path}",
                f"{base}/api/submissions/{submission}/files/",
            ]
            for path in rest
        ],
        at_once,
    )
    curl(
        [
            *auth,
            "-H",
            "Content-Type: application/json",
            "-d",
            json.dumps({"submission_id": submission}),
            f"{base}/api/jobs/",
        ]
    )


def cli_round(
    base: str, token: str, folder: Path, key: str, work: Path, *, derived: bool, parallel: int = 2
) -> float:
    """One `yoyaku submit`; returns its peak RSS in MB. With `derived`, the key is the
    client's own (from the files' hashes; a per-round `--metadata` makes it new each round)."""
    env = {
        **os.environ,
        "YOYAKU_URL": base,
        "YOYAKU_TOKEN": token,
        "YOYAKU_CONFIG_DIR": str(work / f"config-{key}"),
        "COLUMNS": "120",
    }
    with (work / f"cli-{key}.stderr").open("wb") as stderr:
        process = subprocess.Popen(
            [
                YOYAKU,
                "submit",
                str(folder),
                "--progress",
                "--json",
                "--parallel",
                str(parallel),
                *(
                    ["--metadata", json.dumps({"round": key})]
                    if derived
                    else ["--idempotency-key", key]
                ),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        log = (work / f"cli-{key}.stderr").read_text(errors="replace")
        raise RuntimeError(f"yoyaku failed ({process.returncode}): {log[-2000:]}")
    return usage.ru_maxrss / 1024


def main() -> None:
    count = int(os.environ.get("BENCH_FILES", "10"))
    size = int(float(os.environ.get("BENCH_FILE_MB", "100")) * MB)
    rounds = int(os.environ.get("BENCH_ROUNDS", "5"))
    os.environ.setdefault("QUOTA_MAX_STORAGE_BYTES", str(100 * 1024**3))
    os.environ.setdefault("QUOTA_MAX_JOBS_PER_DAY", "1000")
    os.environ.setdefault("QUOTA_MAX_CONCURRENT_JOBS", "1000")
    work = Path(tempfile.mkdtemp(prefix="yoyaku-bench-client-"))
    server = None
    try:
        server, port, token, _env = start_server(work)
        base = f"http://127.0.0.1:{port}"
        folder = work / "submission"
        folder.mkdir()
        parts = [make_file(folder / f"part{i:02d}.py", size) for i in range(count)]
        (folder / "main.py").write_text("print('bench')\n")
        (folder / "config.yaml").write_text("bench: true\n")
        files = [*parts, folder / "config.yaml", folder / "main.py"]
        total = sum(p.stat().st_size for p in files)
        for path in files:  # the same page-cache state for every way
            with path.open("rb") as handle:
                hashlib.file_digest(handle, "sha256")

        timings: dict[str, list[float]] = {
            "curl": [],
            "curl + sha256sum": [],
            "curl, 2 at a time": [],
            "yoyaku": [],
            "yoyaku --parallel 1": [],
            "yoyaku derived key": [],
        }
        cpu: dict[str, list[float]] = {way: [] for way in timings}
        peak_rss_mb = 0.0
        media = work / "media"
        for index in range(rounds):
            for way in timings:
                cpu_before = children_cpu()
                started = time.perf_counter()
                if way.startswith("yoyaku"):
                    rss = cli_round(
                        base,
                        token,
                        folder,
                        f"bench-{len(way)}-{index}",  # a key per way and round
                        work,
                        derived=way.endswith("derived key"),
                        parallel=1 if way.endswith("--parallel 1") else 2,
                    )
                    peak_rss_mb = max(peak_rss_mb, rss)
                else:
                    curl_round(
                        base,
                        token,
                        files,
                        checksums="sha256sum" in way,
                        at_once=2 if "2 at a time" in way else 1,
                    )
                timings[way].append(time.perf_counter() - started)
                cpu[way].append(children_cpu() - cpu_before)
                # Free the disk between rounds (the rows stay; nothing reads them again).
                for child in media.iterdir():
                    shutil.rmtree(child, ignore_errors=True)

        print(
            f"client upload: {count} x {size / MB:.0f} MB ({total / MB:.0f} MB) per round, "
            f"{rounds} rounds, gunicorn 5 workers, "
            f"{'PostgreSQL' if 'postgres' in os.environ.get('DATABASE_URL', '') else 'SQLite'}"
        )
        print(f"{'way':<20} {'median s':>9} {'MB/s':>8} {'client CPU s':>12}   all rounds (s)")
        medians: dict[str, float] = {}
        for way, values in timings.items():
            medians[way] = statistics.median(values)
            rate = total / MB / medians[way]
            rounds_text = " ".join(f"{v:.2f}" for v in values)
            used = statistics.median(cpu[way])
            print(f"{way:<20} {medians[way]:>9.2f} {rate:>8.0f} {used:>12.2f}   {rounds_text}")
        ratio = medians["curl"] / medians["yoyaku"]
        ratio_sha = medians["curl + sha256sum"] / medians["yoyaku"]
        ratio_derived = medians["curl"] / medians["yoyaku derived key"]
        verdict = "met" if ratio >= 0.9 else "MISSED"
        print(f"yoyaku / curl throughput: {ratio:.2f} (target >= 0.90: {verdict})")
        print(f"yoyaku / (curl + sha256sum) throughput: {ratio_sha:.2f}")
        at_once = medians["curl, 2 at a time"] / medians["yoyaku"]
        one = medians["curl"] / medians["yoyaku --parallel 1"]
        print(f"yoyaku / curl 2 at a time throughput: {at_once:.2f}")
        print(f"yoyaku --parallel 1 / curl throughput: {one:.2f}")
        print(f"yoyaku with its derived key / curl throughput: {ratio_derived:.2f}")
        print(f"yoyaku peak RSS: {peak_rss_mb:.0f} MB")
        print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
