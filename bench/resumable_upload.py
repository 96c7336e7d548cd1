"""Resumable upload benchmark against a real gunicorn process on loopback.

One run, the same bytes (`BENCH_RESUMABLE_MB`, default 2048) three ways:
- a single multipart request to `POST /api/submissions/{id}/files/` (the baseline; the server
  runs with MAX_UPLOAD_FILE_SIZE raised to hold it);
- the resumable uploads draft in appends of `BENCH_APPEND_MB` (default 256): throughput as a
  ratio to the baseline, and the workers' peak RSS growth;
- a client that stops at half and resumes: bytes it sends after asking the offset.

SQLite in a temporary folder by default; `DATABASE_URL` selects PostgreSQL. `BENCH_S3=1` runs
the server on S3 (moto's server on loopback, in this process): the resumable upload then
goes to an S3 multipart upload as it arrives.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.upload import MB, Client, Sampler, make_file, start_server


def _request(port: int, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def _chunks(source: Path, start: int, length: int) -> Any:
    with source.open("rb") as handle:
        handle.seek(start)
        left = length
        while left > 0:
            chunk = handle.read(min(MB, left))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk


def resumable(port: int, token: str, source: Path, append: int, stop_at: int | None = None) -> Any:
    """Upload `source` through the draft; with `stop_at`, stop there, then resume as a new
    client would (HEAD, then the rest). Returns (path, bytes sent after the HEAD)."""
    size = source.stat().st_size
    auth = {"Authorization": f"Bearer {token}", "Upload-Draft-Interop-Version": "8"}
    status, headers, _ = _request(
        port,
        "POST",
        "/api/uploads/",
        b"",
        {**auth, "Upload-Complete": "?0", "Upload-Length": str(size)},
    )
    assert status == 201, status
    path = urlsplit(headers["Location"]).path
    offset = 0
    end = stop_at if stop_at is not None else size
    resumed_bytes = 0
    for phase in ("first", "resume"):
        if phase == "resume":
            if stop_at is None:
                break
            status, headers, _ = _request(port, "HEAD", path, None, auth)
            offset = int(headers["Upload-Offset"])
            end = size
        while offset < end:
            length = min(append, end - offset)
            last = offset + length == size
            status, headers, body = _request(
                port,
                "PATCH",
                path,
                _chunks(source, offset, length),
                {
                    **auth,
                    "Content-Type": "application/partial-upload",
                    "Content-Length": str(length),
                    "Upload-Offset": str(offset),
                    "Upload-Complete": "?1" if last else "?0",
                },
            )
            assert status in (200, 204), (status, body[:300])
            if phase == "resume":
                resumed_bytes += length
            offset = int(headers["Upload-Offset"])
    return path, resumed_bytes, json.loads(body or b"{}")


def s3_env() -> dict[str, str]:
    """With BENCH_S3=1: moto's S3 server on loopback and a bucket, as the server's env."""
    if os.environ.get("BENCH_S3") != "1":
        return {}
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {
        "AWS_STORAGE_BUCKET_NAME": "bench-uploads",
        "AWS_S3_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_S3_REGION_NAME": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    boto3.client(
        "s3",
        endpoint_url=env["AWS_S3_ENDPOINT_URL"],
        region_name="us-east-1",
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    ).create_bucket(Bucket=env["AWS_STORAGE_BUCKET_NAME"])
    return env


def main() -> None:
    size = int(float(os.environ.get("BENCH_RESUMABLE_MB", "2048")) * MB)
    append = int(float(os.environ.get("BENCH_APPEND_MB", "256")) * MB)
    os.environ.setdefault("MAX_UPLOAD_FILE_SIZE", str(size + MB))
    os.environ.setdefault("MAX_REQUEST_BODY_SIZE", str(size + 2 * MB))
    work = Path(tempfile.mkdtemp(prefix="resumable-bench-"))
    try:
        source = make_file(work / "data.bin", size)
        digest = hashlib.sha256()
        with source.open("rb") as handle:
            while chunk := handle.read(MB):
                digest.update(chunk)
        server, port, token, _ = start_server(work, **s3_env())
        try:
            client = Client(port, token)
            first = work / "main.py"
            first.write_bytes(b"print(1)\n")
            submission_id = client.create("main.py", first)
            started = time.monotonic()
            status, _ = client.add(submission_id, "data.py", source)
            single = time.monotonic() - started
            assert status == 201, status
            with Sampler(server.pid, ()) as sampler:
                started = time.monotonic()
                _, _, body = resumable(port, token, source, append)
                chunked = time.monotonic() - started
            assert body["sha256"] == digest.hexdigest()
            _, resumed, _ = resumable(port, token, source, append, stop_at=size // 2)
            where = "local disk"
            if os.environ.get("BENCH_S3") == "1":
                part = int(os.environ.get("UPLOAD_S3_PART_SIZE", str(16 * MB)))
                where = f"S3 (moto, in the bench process), parts of {part / MB:.0f} MiB"
            print(f"bytes: {size / MB:.0f} MiB, appends of {append / MB:.0f} MiB, on {where}")
            print(f"single request: {single:.2f} s ({size / MB / single:.0f} MiB/s)")
            print(f"resumable: {chunked:.2f} s ({size / MB / chunked:.0f} MiB/s)")
            print(f"throughput ratio (resumable / single): {single / chunked:.2f}")
            print(f"worker peak RSS growth: {sampler.peak_growth_kb / 1024:.1f} MiB")
            print(
                f"resumed at half: sent {resumed / MB:.0f} MiB after the HEAD "
                f"(half: {size / 2 / MB:.0f})"
            )
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"bench process (client, and moto on S3) peak RSS: {peak:.0f} MiB")
        finally:
            server.terminate()
            server.wait(30)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
