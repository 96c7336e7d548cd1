"""Metrics of the submissions app: uploads (SPEC §4; seed 004 asks for the upload success
rate, retries and the file-size distribution)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from functools import wraps
from pathlib import Path
from typing import ParamSpec, TypeVar

from django.conf import settings
from django.core.files.storage import FileSystemStorage, default_storage
from prometheus_client.core import Metric

from apps.core.metrics import count_refusals, counter, gauge, histogram, register_scrape_collector

P = ParamSpec("P")
R = TypeVar("R")

# Every refusal an upload can get (SPEC §4, §10, §11.2), created at 0 so rates see them.
UPLOAD_REFUSAL_CODES = (
    "invalid_request",
    "invalid_filename",
    "invalid_extension",
    "file_too_large",
    "checksum_mismatch",
    "duplicate_filename",
    "too_many_files",
    "invalid_archive",
    "unsafe_archive",
    "request_too_large",
    "storage_quota_exceeded",
    "submission_sealed",
    "not_found",
    "permission_denied",
    "not_participant",
    "phase_closed",
)

UPLOADS = counter(
    "yoyaku_uploads_total",
    "Upload requests (a new submission with its files, or one added file) by outcome: "
    "created, safe_retry (the same name and content again, answered 200 with the stored "
    "file), or the refusal's error code.",
    ["outcome"],
    initial=[(code,) for code in ("created", "safe_retry", *UPLOAD_REFUSAL_CODES)],
)
UPLOAD_FILE_SIZE = histogram(
    "yoyaku_upload_file_size_bytes",
    "Size of each file stored by an upload.",
    buckets=(1024, 16 * 1024, 256 * 1024, 1024**2, 10 * 1024**2, 50 * 1024**2, 100 * 1024**2),
)
UPLOAD_STORED_BYTES = counter(
    "yoyaku_upload_stored_bytes_total",
    "Bytes of submission files stored (safe retries store nothing).",
)


def upload_created(*, sizes: list[int]) -> None:
    """One upload request stored these files."""
    UPLOADS.labels("created").inc()
    for size in sizes:
        UPLOAD_FILE_SIZE.observe(size)
        UPLOAD_STORED_BYTES.inc(size)


def upload_safe_retry() -> None:
    UPLOADS.labels("safe_retry").inc()


def counts_upload_refusals(function: Callable[P, R]) -> Callable[P, R]:
    """Count a refusal leaving `function` on `yoyaku_uploads_total` with its code (once, however
    many counted functions it passes through)."""

    @wraps(function)
    def counted(*args: P.args, **kwargs: P.kwargs) -> R:
        with count_refusals(UPLOADS):
            return function(*args, **kwargs)

    return counted


# --- read at scrape time ---------------------------------------------------------------------


def storage_collect() -> Iterable[Metric]:
    """Free and total bytes of the file system holding MEDIA_ROOT when files are stored there
    (a statvfs call; no samples for S3, whose capacity is not ours to watch)."""
    if not isinstance(default_storage, FileSystemStorage):
        return
    root = Path(settings.MEDIA_ROOT)
    while not root.exists() and root != root.parent:
        root = root.parent
    usage = shutil.disk_usage(root)
    yield gauge(
        "yoyaku_storage_free_bytes",
        "Free bytes on the file system of the submission files (MEDIA_ROOT).",
        usage.free,
    )
    yield gauge(
        "yoyaku_storage_capacity_bytes",
        "Size of the file system of the submission files (MEDIA_ROOT).",
        usage.total,
    )


register_scrape_collector("storage", storage_collect)

# Resumable uploads (SPEC §11.5).
RESUMABLE_BYTES = counter(
    "yoyaku_resumable_upload_bytes_total",
    "Bytes durably stored by resumable uploads (counted when their offset is saved).",
)
RESUMABLE_RESUMES = counter(
    "yoyaku_resumable_upload_resumes_total",
    "Appends to a resumable upload that start past its first byte (a later request of the "
    "upload, after a pause or an interruption).",
)
RESUMABLE_EXPIRIES = counter(
    "yoyaku_resumable_upload_expiries_total",
    "Resumable uploads removed by cleanup, never attached within UPLOAD_EXPIRY_HOURS of their "
    "last byte.",
)
