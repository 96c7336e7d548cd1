"""Upload benchmark against a real gunicorn process on loopback.

Measures, in one run, next to a plain file copy of the same bytes (the baseline):
- one 100 MB upload: wall time and the server worker's peak RSS growth;
- 10 sequential 10 MB uploads;
- 5 concurrent clients uploading 1 MB files (files/s);
- a 100 MB + 1 byte upload: time to refusal, the code, and the most bytes ever on the
  server's disk for it (temporary upload folder + media).

SQLite in a temporary folder by default; `DATABASE_URL` selects PostgreSQL. `BENCH_BIG_MB`
changes the large size (default 100). The server is the `web` process as the Procfile runs it
(config/gunicorn.py); `measure(worker_class="sync")` runs the same against gunicorn's sync
workers, as bench/web_server.py does to compare the two.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.benchlib.quick import sized  # noqa: E402
from bench.benchlib.web import print_log_tail, web_start, web_stop  # noqa: E402

MB = 1024 * 1024
CHUNK = MB


def make_file(path: Path, size: int) -> Path:
    with path.open("wb") as handle:
        left = size
        block = os.urandom(CHUNK)
        while left > 0:
            handle.write(block[: min(left, CHUNK)])
            left -= CHUNK
    return path


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def dir_bytes(*roots: Path) -> int:
    total = 0
    for root in roots:
        for dirpath, _, files in os.walk(root):
            for name in files:
                with contextlib.suppress(OSError):  # removed while we looked
                    total += os.stat(os.path.join(dirpath, name)).st_size
    return total


class Sampler:
    """Samples worker RSS and on-disk bytes every few ms while a request runs."""

    def __init__(self, master: int, disk_roots: tuple[Path, ...]) -> None:
        self.master = master
        self.disk_roots = disk_roots
        self.base = {pid: rss_kb(pid) for pid in children(master)}
        self.peak_growth_kb = 0
        self.peak_disk = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid, base in self.base.items():
                self.peak_growth_kb = max(self.peak_growth_kb, rss_kb(pid) - base)
            self.peak_disk = max(self.peak_disk, dir_bytes(*self.disk_roots))
            time.sleep(0.005)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class Client:
    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.token = token

    def _post_file(
        self, path: str, field: str, name: str, source: Path
    ) -> tuple[int, dict[str, Any]]:
        boundary = uuid.uuid4().hex
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; '
            f'filename="{name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        tail = f"\r\n--{boundary}--\r\n".encode()
        size = source.stat().st_size

        def body() -> Iterator[bytes]:
            yield head
            with source.open("rb") as handle:
                while chunk := handle.read(CHUNK):
                    yield chunk
            yield tail

        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        try:
            conn.request(
                "POST",
                path,
                body=body(),
                headers={
                    "Authorization": f"Bearer {self.token}",
                    "Content-Type": f"multipart/form-data; boundary={boundary}",
                    "Content-Length": str(len(head) + size + len(tail)),
                },
            )
            response = conn.getresponse()
            return response.status, json.loads(response.read() or b"{}")
        finally:
            conn.close()

    def declare_only(self, path: str, length: int) -> tuple[int, dict[str, Any]]:
        """Send only the headers of a body declaring `length` bytes, then read the answer."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        try:
            conn.putrequest("POST", path)
            conn.putheader("Authorization", f"Bearer {self.token}")
            conn.putheader("Content-Type", "multipart/form-data; boundary=x")
            conn.putheader("Content-Length", str(length))
            conn.endheaders()
            response = conn.getresponse()
            return response.status, json.loads(response.read() or b"{}")
        finally:
            conn.close()

    def create(self, name: str, source: Path) -> str:
        status, body = self._post_file("/api/submissions/", "files", name, source)
        assert status == 201, (status, body)
        return str(body["submission_id"])

    def add(self, submission_id: str, name: str, source: Path) -> tuple[int, dict[str, Any]]:
        return self._post_file(f"/api/submissions/{submission_id}/files/", "file", name, source)


def start_server(
    work: Path, worker_class: str | None = None, **extra_env: str
) -> tuple[subprocess.Popen[bytes], int, str, dict[str, str]]:
    web = web_start(work, workers=sized(5, 1), timeout=300, worker_class=worker_class, **extra_env)
    return web.process, web.port, web.token, web.env


def measure(worker_class: str | None = None, *, report: bool = True) -> dict[str, float]:
    """One run of every measure; prints them when `report`. Returns the figures by name."""
    big = int(float(os.environ.get("BENCH_BIG_MB", "100")) * MB)
    # The quick mode's sizes: 2 sequential uploads of 64 KiB, 2 clients x 2 files of 64 KiB.
    sequential, sequential_size = sized(10, 2), sized(10 * MB, 64 * 1024)
    clients, per_client, concurrent_size = sized(5, 2), sized(20, 2), sized(MB, 64 * 1024)
    work = Path(tempfile.mkdtemp(prefix="yoyaku-bench-upload-"))
    server = None
    try:
        # The refused upload is `big` + 1 byte: the server's limit is `big`.
        server, port, token, _env = start_server(work, worker_class, MAX_UPLOAD_FILE_SIZE=str(big))
        client = Client(port, token)
        data = work / "data"
        data.mkdir()
        big_file = make_file(data / "big.bin", big)
        over_file = make_file(data / "over.bin", big + 1)
        ten = make_file(data / "ten.bin", sequential_size)
        one = make_file(data / "one.bin", concurrent_size)
        small = make_file(data / "small.bin", 1024)

        # Baseline: a plain copy of the same bytes on the same disk (and hashing them).
        started = time.perf_counter()
        shutil.copyfile(big_file, data / "copy.bin")
        copy_s = time.perf_counter() - started
        started = time.perf_counter()
        with big_file.open("rb") as handle:
            expected_sha = hashlib.file_digest(handle, "sha256").hexdigest()
        hash_s = time.perf_counter() - started
        (data / "copy.bin").unlink()

        submission = client.create("main.py", small)
        for i in range(10):  # warm every worker (imports, first connection)
            client.add(submission, f"warm{i}.py", small)
        master = server.pid
        disk = (work / "incoming", work / "media")

        with Sampler(master, disk) as small_sample:
            status, _ = client.add(submission, "small.py", one)
        assert status == 201

        with Sampler(master, disk) as sample:
            started = time.perf_counter()
            status, body = client.add(submission, "big.zip".replace(".zip", ".py"), big_file)
            big_s = time.perf_counter() - started
        assert status == 201, body
        assert body["sha256"] == expected_sha

        started = time.perf_counter()
        for i in range(sequential):
            status, body = client.add(submission, f"ten{i}.py", ten)
            assert status == 201, body
        ten_s = time.perf_counter() - started

        targets = [client.create("main.py", small) for _ in range(clients)]
        errors: list[object] = []

        def run(index: int) -> None:
            for i in range(per_client):
                status, body = client.add(targets[index], f"f{i}.py", one)
                if status != 201:
                    errors.append(body)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        conc_s = time.perf_counter() - started
        assert not errors, errors[:3]
        files_per_s = clients * per_client / conc_s

        before = dir_bytes(work / "media")
        with Sampler(master, disk) as over_sample:
            started = time.perf_counter()
            status, body = client.add(submission, "over.py", over_file)
            over_s = time.perf_counter() - started
        assert status == 400, (status, body)
        assert body["code"] == "file_too_large", body
        assert dir_bytes(work / "media") == before
        over_disk = max(over_sample.peak_disk - before, 0)

        started = time.perf_counter()
        # Past MAX_REQUEST_BODY_SIZE (1 GiB + 10 MiB by default): the event-loop server refuses it
        # itself (413 request_too_large); sync workers pass it to the app (file_too_large).
        huge_status, huge = client.declare_only(f"/api/submissions/{submission}/files/", 2048 * MB)
        huge_s = time.perf_counter() - started
        assert huge["code"] in ("file_too_large", "request_too_large"), (huge_status, huge)

        figures = {
            "upload_big_s": big_s,
            "rss_growth_mb": sample.peak_growth_kb / 1024,
            "ten_sequential_s": ten_s,
            "files_per_s": files_per_s,
            "over_refused_s": over_s,
            "over_disk_mb": over_disk / MB,
            "declared_refused_ms": huge_s * 1000,
        }
        if not report:
            return figures

        mb = big / MB
        print(
            f"baseline: copy {mb:.0f} MB {copy_s:.3f} s ({mb / copy_s:.0f} MB/s), "
            f"sha256 {hash_s:.3f} s"
        )
        print(
            f"upload {mb:.0f} MB: {big_s:.3f} s ({mb / big_s:.0f} MB/s), "
            f"{big_s / copy_s:.1f}x the plain copy, {big_s / hash_s:.1f}x hashing alone "
            "(target <= 2 s)"
        )
        print(
            f"server worker peak RSS growth: {sample.peak_growth_kb / 1024:.1f} MB for "
            f"{mb:.0f} MB, {small_sample.peak_growth_kb / 1024:.1f} MB for 1 MB "
            "(target <= 50 MB)"
        )
        ten_mb, one_mb = sequential_size / MB, concurrent_size / MB
        print(
            f"{sequential} sequential {ten_mb:g} MB uploads: {ten_s:.3f} s "
            f"({ten_s / sequential * 1000:.0f} ms each, {sequential * ten_mb / ten_s:.0f} MB/s)"
        )
        print(
            f"{clients} concurrent clients x {per_client} {one_mb:g} MB files: {conc_s:.3f} s, "
            f"{files_per_s:.1f} files/s (target >= 20)"
        )
        print(
            f"{mb:.0f} MB + 1 byte: refused ({body['code']}) in {over_s:.3f} s "
            f"({over_s / big_s:.2f}x the accepted upload); most bytes on the server's disk "
            f"meanwhile {over_disk / MB:.1f} MB (limit {mb:.0f} MB), none kept"
        )
        print(
            f"a body declaring 2 GB: refused ({huge['code']}) in {huge_s * 1000:.1f} ms, "
            "before a byte of it is read"
        )
        return figures
    except BaseException:
        print_log_tail(work)
        raise
    finally:
        web_stop(server)
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    measure()


if __name__ == "__main__":
    main()
