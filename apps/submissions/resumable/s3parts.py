"""An upload's bytes on S3: an S3 multipart upload fed as the bytes arrive (SPEC §11.5).

The multipart upload is made for the upload's own key; its id is found again by listing the
key's multipart uploads (ListMultipartUploads), so a restarted web process needs no state of
its own. Every part but the last has exactly `UPLOAD_S3_PART_SIZE` bytes (at least S3's 5 MiB).
Part N's bytes are written to a local tail file of its own (`<key>.tail<N>`, fsynced when it is
full and before an offset covering it is saved); a whole part is handed to a second thread
(`s3send`) only after the offset covering it was saved, and its file goes once S3 took it. So
after any crash the listed whole parts plus the tail files after them hold every saved byte:

- killed before a part was sent (or while it was sent): its file is still there, and the
  next append sends it;
- killed after a part was sent, before its file went: the file is older than the listed parts,
  and the next writer removes it.

An append answers only after the part in flight was sent (its ETag is then listed by S3) or
failed (the append answers an error; the part stays in its file). Tail files of the earlier
layout (one file from a part's start holding more than a part) are split when found.

The last byte completes the multipart upload (CompleteMultipartUpload), after the row is saved
complete; `finish` is idempotent (attach calls it too), so a process killed in between leaves
nothing that attach cannot finish. The completed object is the file: no copy.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings
from django.core.files.storage import storages

from apps.submissions.exceptions import UploadStorageUnavailable
from apps.submissions.resumable.s3send import PartSender

S3_MIN_PART = 5 * 1024 * 1024
COPY_CHUNK = 1024 * 1024
# S3 may take minutes to assemble a large object on CompleteMultipartUpload.
COMPLETE_READ_TIMEOUT = 900


def part_size() -> int:
    return max(S3_MIN_PART, int(settings.UPLOAD_S3_PART_SIZE))


def is_s3() -> bool:
    """The default storage is django-storages' S3 backend."""
    storage = storages["default"]
    return hasattr(storage, "bucket_name") and hasattr(storage, "connection")


def _client_and_key(key: str) -> tuple[Any, str, str]:
    storage: Any = storages["default"]
    return storage.connection.meta.client, storage.bucket_name, storage._normalize_name(key)


def _tail_path(key: str, part: int) -> Path:
    return Path(settings.MEDIA_ROOT) / f"{key}.tail{part}"


def tail_files(key: str) -> dict[int, Path]:
    base = Path(settings.MEDIA_ROOT) / key
    found: dict[int, Path] = {}
    if base.parent.is_dir():
        for path in base.parent.glob(f"{base.name}.tail*"):
            number = path.name.rsplit(".tail", 1)[1]
            if number.isdigit():
                found[int(number)] = path
    return found


def _multipart_id(client: Any, bucket: str, name: str, *, create: bool) -> str | None:
    listed = client.list_multipart_uploads(Bucket=bucket, Prefix=name).get("Uploads", [])
    ids = sorted((u["Initiated"], u["UploadId"]) for u in listed if u["Key"] == name)
    if ids:
        return str(ids[0][1])
    if not create:
        return None
    return str(client.create_multipart_upload(Bucket=bucket, Key=name)["UploadId"])


def _parts(client: Any, bucket: str, name: str, upload_id: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    paginator = client.get_paginator("list_parts")
    for page in paginator.paginate(Bucket=bucket, Key=name, UploadId=upload_id):
        parts.extend(page.get("Parts", []))
    return sorted(parts, key=lambda p: int(p["PartNumber"]))


def _full_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The leading run of whole parts numbered 1, 2, ... (a short last part is left out)."""
    size = part_size()
    full: list[dict[str, Any]] = []
    for number, part in enumerate(parts, start=1):
        if int(part["PartNumber"]) != number or int(part["Size"]) != size:
            break
        full.append(part)
    return full


def _durable(handle: BinaryIO) -> None:
    handle.flush()
    os.fsync(handle.fileno())


@contextlib.contextmanager
def _storage_errors() -> Iterator[None]:
    """A store that cannot be reached or refuses a call: UploadStorageUnavailable (503)."""
    try:
        yield
    except (BotoCoreError, ClientError) as exc:
        raise UploadStorageUnavailable(
            f"The storage cannot be reached ({type(exc).__name__}); retry in a moment."
        ) from exc


def _copy_from(source: Path, skip: int, target: Path) -> None:
    """`target` made from `source` without its first `skip` bytes (written to a temporary
    name, fsynced, renamed)."""
    temporary = target.with_name(target.name + ".new")
    with source.open("rb") as reader, temporary.open("wb") as writer:
        reader.seek(skip)
        shutil.copyfileobj(reader, writer, COPY_CHUNK)
        _durable(writer)
    temporary.replace(target)


def _recover(key: str, first: int) -> dict[int, Path]:
    """The tail files from part `first` (the first part S3 does not hold whole) on, one per
    part, in a row: files of parts S3 holds go; a file holding more than a part (the earlier
    layout, or a killed split) is split into one file per part."""
    size = part_size()
    tails = tail_files(key)
    for number in sorted(n for n in tails if n < first):
        path = tails.pop(number)
        skip = (first - number) * size
        if first not in tails and path.stat().st_size > skip:
            _copy_from(path, skip, _tail_path(key, first))
            tails[first] = _tail_path(key, first)
        path.unlink()
    number = first
    while number in tails:
        path = tails[number]
        if path.stat().st_size > size:
            if number + 1 not in tails:
                _copy_from(path, size, _tail_path(key, number + 1))
                tails[number + 1] = _tail_path(key, number + 1)
            with path.open("r+b") as handle:
                handle.truncate(size)
                _durable(handle)
        number += 1
    for later in [n for n in tails if n > number]:
        tails.pop(later).unlink()
    return tails


class S3Sink:
    """The writer of one append on S3: bytes go to the current part's tail file; after each
    saved checkpoint the whole parts are handed to the sending thread."""

    def __init__(self, key: str, offset: int) -> None:
        self.key = key
        self.size = part_size()
        self.client, self.bucket, self.name = _client_and_key(key)
        with _storage_errors():
            self.upload_id = str(_multipart_id(self.client, self.bucket, self.name, create=True))
            listed = _full_parts(_parts(self.client, self.bucket, self.name, self.upload_id))
        first = len(listed) + 1
        _tail_path(key, first).parent.mkdir(parents=True, exist_ok=True)
        held = sum(path.stat().st_size for path in _recover(key, first).values())
        start = (first - 1) * self.size
        if offset < start or held < offset - start:
            raise RuntimeError(f"Upload {key}: stored parts and tail do not reach {offset}.")
        self.next_send = first  # the first part not handed to the sender
        self.current = first  # the part being filled
        self.filled = 0
        self.handle: BinaryIO | None = None
        self.sender = PartSender(self._send_part, name=f"s3 parts {key}")
        self.cut_back(offset)
        self.flush_parts()

    def _send_part(self, number: int, path: Path) -> None:
        """On the sending thread: part `number` from its file to S3, then the file goes. The
        open file is the body (botocore reads it for its checksum, seeks back and streams it),
        so no part is held in memory."""
        with path.open("rb") as body:
            self.client.upload_part(
                Bucket=self.bucket,
                Key=self.name,
                UploadId=self.upload_id,
                PartNumber=number,
                Body=body,
            )
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self.handle is None:
                self.handle = _tail_path(self.key, self.current).open("ab")
            piece = view[: self.size - self.filled]
            self.handle.write(piece)
            self.filled += len(piece)
            view = view[len(piece) :]
            if self.filled == self.size:
                _durable(self.handle)
                self.handle.close()
                self.handle = None
                self.current += 1
                self.filled = 0

    def make_durable(self) -> None:
        if self.handle is not None:
            _durable(self.handle)

    def cut_back(self, offset: int) -> None:
        """Drop what was written past `offset` (never below a part handed over: those are
        covered by the saved offset)."""
        if self.handle is not None:
            self.handle.close()
            self.handle = None
        self.current, self.filled = offset // self.size + 1, offset % self.size
        for number, path in tail_files(self.key).items():
            if number > self.current:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        path = _tail_path(self.key, self.current)
        if path.exists():
            os.truncate(path, self.filled)

    def part_ready(self) -> bool:
        return self.next_send < self.current

    def flush_parts(self) -> None:
        """Hand the whole parts (their offset is saved) to the sender, one at a time."""
        while self.next_send < self.current:
            self.sender.submit(self.next_send, _tail_path(self.key, self.next_send))
            self.next_send += 1

    def after_save(self, *, complete: bool) -> None:
        self.flush_parts()
        if complete:
            self.sender.drain()
            self.close()
            with _storage_errors():
                finish(self.key)

    def close(self, *, report: bool = True) -> None:
        """Wait for the part in flight; raise its failure (when `report`) once."""
        if self.handle is not None:
            self.handle.close()
            self.handle = None
        self.sender.close(report=report)


def finish(key: str) -> None:
    """Complete the key's multipart upload with the tail files as its last parts, then remove
    them. Idempotent: with no multipart upload left the object is already whole."""
    client, bucket, name = _client_and_key(key)
    upload_id = _multipart_id(client, bucket, name, create=False)
    if upload_id is None:
        return
    parts = _full_parts(_parts(client, bucket, name, upload_id))
    tails = _recover(key, len(parts) + 1)
    for number in sorted(tails):
        body = tails[number].read_bytes()
        if body or not parts:
            answer = client.upload_part(
                Bucket=bucket, Key=name, UploadId=upload_id, PartNumber=number, Body=body
            )
            parts.append({"PartNumber": number, "ETag": answer["ETag"]})
    if not parts:
        answer = client.upload_part(
            Bucket=bucket, Key=name, UploadId=upload_id, PartNumber=1, Body=b""
        )
        parts.append({"PartNumber": 1, "ETag": answer["ETag"]})
    try:
        _completion_client().complete_multipart_upload(
            Bucket=bucket,
            Key=name,
            UploadId=upload_id,
            MultipartUpload={
                "Parts": [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]} for p in parts]
            },
        )
    except (BotoCoreError, ClientError):
        # A completion whose answer was lost (and whose retry found the upload gone) is done.
        if _multipart_id(client, bucket, name, create=False) is not None:
            raise
        client.head_object(Bucket=bucket, Key=name)
    _remove_tails(key)


def _completion_client() -> Any:
    """The default storage's S3 client with a long read timeout, for CompleteMultipartUpload
    (built as django-storages builds its own)."""
    storage: Any = storages["default"]
    return storage._create_session().client(
        "s3",
        region_name=storage.region_name,
        use_ssl=storage.use_ssl,
        endpoint_url=storage.endpoint_url,
        config=storage.client_config.merge(Config(read_timeout=COMPLETE_READ_TIMEOUT)),
        verify=storage.verify,
    )


def _remove_tails(key: str) -> None:
    for path in tail_files(key).values():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def remove(key: str) -> None:
    """Abort the key's multipart uploads, delete its object and its tail files."""
    client, bucket, name = _client_and_key(key)
    listed = client.list_multipart_uploads(Bucket=bucket, Prefix=name).get("Uploads", [])
    for upload in listed:
        if upload["Key"] == name:
            client.abort_multipart_upload(Bucket=bucket, Key=name, UploadId=upload["UploadId"])
    client.delete_object(Bucket=bucket, Key=name)
    _remove_tails(key)


def download(key: str, target: Path) -> Path:
    """The completed object copied to a local file (for readers that need a path)."""
    client, bucket, name = _client_and_key(key)
    target.parent.mkdir(parents=True, exist_ok=True)
    client.download_file(bucket, name, str(target))
    return target
