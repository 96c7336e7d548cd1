"""Stored bundles for the cleanup tests: moto's S3 server on loopback made the default storage
(as tests/submissions/test_s3.py does), what storage holds under `bundles/`, and bundles sent
to a real web process over HTTP."""

from __future__ import annotations

import io
import os
import uuid
import zipfile
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
import yaml
from django.core.files.storage import storages
from moto.server import ThreadedMotoServer

from tests.benchmarks.bundles import example_files, example_manifest
from tests.processes import http_request

CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def s3_storage(endpoint: str, bucket: str) -> dict[str, Any]:
    return {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": bucket,
            "endpoint_url": endpoint,
            "region_name": "us-east-1",
            "access_key": CREDENTIALS["aws_access_key_id"],
            "secret_key": CREDENTIALS["aws_secret_access_key"],
            "file_overwrite": False,
            "default_acl": None,
        },
    }


def s3_env(endpoint: str, bucket: str) -> dict[str, str]:
    """The same bucket for a child process, through the settings' environment."""
    return {
        "AWS_STORAGE_BUCKET_NAME": bucket,
        "AWS_S3_ENDPOINT_URL": endpoint,
        "AWS_S3_REGION_NAME": "us-east-1",
        "AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS["aws_secret_access_key"],
    }


@pytest.fixture
def s3_bucket(s3_endpoint: str, settings: Any) -> str:
    """A fresh bucket made the default storage; returns its name."""
    bucket = f"yoyaku-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", **CREDENTIALS)
    client.create_bucket(Bucket=bucket)
    settings.STORAGES = {**settings.STORAGES, "default": s3_storage(s3_endpoint, bucket)}
    return bucket


def stored_bundles() -> set[str]:
    """Every stored name under `bundles/` in the default storage (local or S3)."""
    storage = storages["default"]

    def walk(folder: str) -> list[str]:
        try:
            folders, files = storage.listdir(folder)
        except FileNotFoundError:
            return []
        names = [f"{folder}/{name}" for name in files]
        for sub in folders:
            names.extend(walk(f"{folder}/{sub}"))
        return names

    return set(walk("bundles"))


def big_bundle(reference_bytes: int, *, label: str = "") -> bytes:
    """The example bundle with `reference_bytes` of random reference data (stored, not
    compressed) and `label` in its title."""
    files = example_files()
    document = example_manifest()
    document["title"] = f"{document['title']} {label}".strip()
    files["challenge.yaml"] = yaml.safe_dump(document, sort_keys=False).encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED)
        archive.writestr("data/ref/big.bin", os.urandom(reference_bytes))
    return buffer.getvalue()


def post_bundle(port: int, token: str, data: bytes) -> tuple[int, bytes]:
    """POST /api/challenges/ with `data` as the multipart file `bundle` to a real server."""
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="bundle"; '
            'filename="bundle.zip"\r\nContent-Type: application/zip\r\n\r\n'
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    status, _, answer = http_request(
        port,
        "POST",
        "/api/challenges/",
        body,
        **{
            "Authorization": f"Bearer {token}",
            "Content-Type": f"multipart/form-data; boundary={boundary}",
        },
    )
    return status, answer
