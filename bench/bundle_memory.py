"""Bundle memory benchmark: the web process's memory while it applies a 1 GiB bundle.

A bundle whose reference data is one 1 GiB file (stored in the zip, not compressed; written
into a temporary folder, never held in memory) is applied with `POST /api/challenges/` to the
`web` process as the Procfile runs it (gunicorn, config/gunicorn.py, one worker) over loopback.
The worker's peak RSS growth is its VmHWM after the request (reset through
/proc/<pid>/clear_refs just before it) minus its VmRSS at the reset; a sampler reading VmRSS
every 5 ms reports the same figure as a cross-check (the kernel updates VmHWM lazily, so
either may be the higher by a few hundred KiB; the target holds for both). Target: ≤ 64 MiB.
Each run applies a challenge of its own (a new slug, so every run creates, validates, stores
and writes rows); min / median / max over the runs.

A last request sends a small bundle whose challenge.yaml inflates to the same size: it must be
refused within the same memory bound. For scale, the same run reports the time of a plain
copy of the bundle on the same disk.

SQLite in the temporary folder by default; `DATABASE_URL` selects PostgreSQL. `BENCH_RUNS`
(default 5) and `BENCH_BUNDLE_MB` (default 1024) change the runs and the reference file's
size. A 1 GiB bundle plus the multipart framing is above the default `MAX_REQUEST_BODY_SIZE`
(1 GiB + 2.6 MiB), so the server runs with `MAX_REQUEST_BODY_SIZE` at twice the bundle.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.benchlib.web import print_log_tail, web_start, web_stop  # noqa: E402

EXAMPLE = ROOT / "examples" / "benchmarks" / "digits"
MB = 1024 * 1024
CHUNK = MB
TARGET_MB = 64

SETUP = """
from django.contrib.auth.models import Permission, User
from apps.core.services import token_create
u, _ = User.objects.get_or_create(username="bench-host")
u.user_permissions.add(Permission.objects.get(codename="add_challenge"))
u = User.objects.get(pk=u.pk)
u.api_tokens.filter(name="bench").delete()
print(token_create(user=u, name="bench", scopes=["host", "read"]).token)
"""


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def worker_pid(master: int) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if len(found) == 1:
            return int(found[0])
        time.sleep(0.1)
    raise RuntimeError("the server has no single worker")


def reference_file(path: Path, size: int) -> Path:
    """`size` bytes of random data, written a block at a time."""
    block = os.urandom(CHUNK)
    with path.open("wb") as handle:
        left = size
        while left > 0:
            handle.write(block[: min(left, CHUNK)])
            left -= CHUNK
    return path


def base_bundle(path: Path, reference: Path) -> Path:
    """The example bundle's folders with the large reference file, stored (not compressed),
    and no challenge.yaml yet (each run adds its own)."""
    with zipfile.ZipFile(path, "w") as archive:
        for source in sorted(EXAMPLE.rglob("*")):
            name = source.relative_to(EXAMPLE).as_posix()
            if source.is_file() and name != "challenge.yaml":
                archive.write(source, name, compress_type=zipfile.ZIP_DEFLATED)
        archive.write(reference, "data/ref/large.bin", compress_type=zipfile.ZIP_STORED)
    return path


def run_bundle(base: Path, path: Path, slug: str) -> Path:
    """A copy of the base bundle with a challenge.yaml for `slug` added."""
    shutil.copyfile(base, path)
    manifest = (EXAMPLE / "challenge.yaml").read_text().replace("slug: digits", f"slug: {slug}")
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("challenge.yaml", manifest, compress_type=zipfile.ZIP_DEFLATED)
    return path


def oversized_manifest_bundle(path: Path, size: int) -> Path:
    """A bundle whose challenge.yaml is `size` bytes of YAML comments once inflated (about
    1/1000 of that compressed): refused as too large, however it is read."""
    line = b"# " + b"x" * 1021 + b"\n"
    with (
        zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive,
        archive.open("challenge.yaml", "w", force_zip64=True) as member,
    ):
        left = size
        block = line * 1024
        while left > 0:
            member.write(block[: min(left, len(block))])
            left -= len(block)
    return path


class Sampler:
    """The worker's VmRSS every 5 ms while a request runs; its highest value."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError, RuntimeError):
                self.peak_kb = max(self.peak_kb, status_kb(self.pid, "VmRSS"))
            time.sleep(0.005)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def post_bundle(port: int, token: str, source: Path) -> tuple[int, dict[str, Any]]:
    """POST /api/challenges/ with `source` streamed as the multipart file `bundle`."""
    boundary = uuid.uuid4().hex
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="bundle"; '
        f'filename="bundle.zip"\r\nContent-Type: application/zip\r\n\r\n'
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()

    def body() -> Iterator[bytes]:
        yield head
        with source.open("rb") as handle:
            while chunk := handle.read(CHUNK):
                yield chunk
        yield tail

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        conn.request(
            "POST",
            "/api/challenges/",
            body=body(),
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": f"multipart/form-data; boundary={boundary}",
                "Content-Length": str(len(head) + source.stat().st_size + len(tail)),
            },
        )
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def start_server(work: Path, body_limit: int) -> tuple[subprocess.Popen[bytes], int, str]:
    web = web_start(
        work, workers=1, timeout=600, setup=SETUP, MAX_REQUEST_BODY_SIZE=str(body_limit)
    )
    return web.process, web.port, web.token


def one_run(
    port: int, token: str, worker: int, base: Path, work: Path, slug: str
) -> dict[str, float]:
    bundle = run_bundle(base, work / "data" / f"{slug}.zip", slug)
    before_kb = status_kb(worker, "VmRSS")
    Path(f"/proc/{worker}/clear_refs").write_text("5")  # VmHWM := VmRSS
    with Sampler(worker) as sampler:
        started = time.perf_counter()
        status, body = post_bundle(port, token, bundle)
        seconds = time.perf_counter() - started
    assert status == 201, (status, body)
    assert body["bundle_version"] == 1, body
    peak_kb = status_kb(worker, "VmHWM")
    bundle.unlink()
    shutil.rmtree(work / "media" / "bundles" / slug, ignore_errors=True)
    return {
        "growth_mb": (peak_kb - before_kb) / 1024,
        "sampled_mb": (max(sampler.peak_kb, before_kb) - before_kb) / 1024,
        "seconds": seconds,
        "rss_before_mb": before_kb / 1024,
    }


def refused_run(port: int, token: str, worker: int, bundle: Path) -> dict[str, float]:
    """The growth while the server refuses `bundle` (400 `invalid_bundle`)."""
    before_kb = status_kb(worker, "VmRSS")
    Path(f"/proc/{worker}/clear_refs").write_text("5")
    with Sampler(worker) as sampler:
        started = time.perf_counter()
        status, body = post_bundle(port, token, bundle)
        seconds = time.perf_counter() - started
    assert status == 400, (status, body)
    assert body["code"] == "invalid_bundle", body
    peak_kb = max(status_kb(worker, "VmHWM"), sampler.peak_kb)
    return {"growth_mb": (peak_kb - before_kb) / 1024, "seconds": seconds}


def main() -> int:
    runs = int(os.environ.get("BENCH_RUNS", "5"))
    size = int(float(os.environ.get("BENCH_BUNDLE_MB", "1024")) * MB)
    work = Path(tempfile.mkdtemp(prefix="yoyaku-bench-bundle-"))
    server = None
    try:
        (work / "data").mkdir()
        reference = reference_file(work / "data" / "large.bin", size)
        base = base_bundle(work / "data" / "base.zip", reference)
        reference.unlink()
        bundle_bytes = base.stat().st_size
        started = time.perf_counter()
        shutil.copyfile(base, work / "data" / "copy.zip")
        copy_s = time.perf_counter() - started
        (work / "data" / "copy.zip").unlink()

        server, port, token = start_server(work, 2 * bundle_bytes + 64 * MB)
        worker = worker_pid(server.pid)
        # Warm the worker (imports, first connection, first apply) with the same path.
        tag = uuid.uuid4().hex[:8]  # fresh slugs: a PostgreSQL database may be reused
        one_run(port, token, worker, base, work, f"warm-up-{tag}")
        results = [
            one_run(port, token, worker, base, work, f"memory-{tag}-{i}") for i in range(runs)
        ]

        oversized = oversized_manifest_bundle(work / "data" / "oversized.zip", size)
        refused = refused_run(port, token, worker, oversized)

        growth = sorted(r["growth_mb"] for r in results)
        sampled = sorted(r["sampled_mb"] for r in results)
        seconds = sorted(r["seconds"] for r in results)
        print(
            f"bundle {bundle_bytes / MB:.1f} MiB (reference file {size / MB:.0f} MiB, stored); "
            f"{runs} runs; worker RSS before {results[0]['rss_before_mb']:.1f} MiB; "
            f"plain copy of the bundle {copy_s:.2f} s"
        )
        print(
            f"web worker peak RSS growth (VmHWM): min {growth[0]:.1f} / median "
            f"{statistics.median(growth):.1f} / max {growth[-1]:.1f} MiB (target <= {TARGET_MB})"
        )
        print(
            f"  sampled every 5 ms: min {sampled[0]:.1f} / median "
            f"{statistics.median(sampled):.1f} / max {sampled[-1]:.1f} MiB"
        )
        print(
            f"apply time: min {seconds[0]:.2f} / median {statistics.median(seconds):.2f} / max "
            f"{seconds[-1]:.2f} s ({seconds[0] / copy_s:.1f}x the plain copy at best)"
        )
        print(
            f"a {oversized.stat().st_size / MB:.1f} MiB bundle whose challenge.yaml inflates "
            f"to {size / MB:.0f} MiB: refused (invalid_bundle) in {refused['seconds']:.2f} s, "
            f"peak RSS growth {refused['growth_mb']:.1f} MiB (target <= {TARGET_MB})"
        )
        worst = max(growth[-1], sampled[-1], refused["growth_mb"])
        return 0 if worst <= TARGET_MB else 1
    except BaseException:
        print_log_tail(work)
        raise
    finally:
        web_stop(server)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
