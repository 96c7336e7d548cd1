"""An upload's bytes on S3: an S3 multipart upload fed as the bytes arrive (SPEC §11.5).

The multipart upload is made for the upload's own key; its id is found again by listing the
key's multipart uploads (ListMultipartUploads), so a restarted web process needs no state of
its own. Every part but the last has exactly `UPLOAD_S3_PART_SIZE` bytes (at least S3's 5 MiB).
The bytes that do not fill a part yet wait in a local tail file, fsynced before the offset
that covers them is saved. A tail file is named after the part it starts with
(`<key>.tail<N>`); a part is sent only after the offset covering its bytes was saved, then the
tail rolls to the next part number, and the old tail goes. So after any crash the listed parts
(ListParts) plus the tail file of the part after them hold every saved byte:

- killed before a part is sent: its bytes are still in the tail, sent on the next append;
- killed after the part is sent, before the tail rolled: the old tail holds the next part's
  bytes past the first part-size bytes, and the next append rolls it.

The last byte completes the multipart upload (CompleteMultipartUpload), after the row is saved
complete; `finish` is idempotent (attach calls it too), so a process killed in between leaves
nothing that attach cannot finish. The completed object is the file: no copy.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any, BinaryIO

from django.conf import settings
from django.core.files.storage import storages

S3_MIN_PART = 5 * 1024 * 1024
COPY_CHUNK = 1024 * 1024


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


def _roll(key: str, source: Path, skip: int, part: int) -> Path:
    """The tail of `part` made from `source` without its first `skip` bytes (written to a
    temporary name, fsynced, renamed), the other tails removed."""
    target = _tail_path(key, part)
    if source != target:
        temporary = target.with_name(target.name + ".new")
        with source.open("rb") as reader, temporary.open("wb") as writer:
            reader.seek(skip)
            shutil.copyfileobj(reader, writer, COPY_CHUNK)
            _durable(writer)
        temporary.replace(target)
    for number, path in tail_files(key).items():
        if number != part:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    return target


class S3Sink:
    """The writer of one append on S3: bytes go to the tail; after each saved checkpoint
    the whole parts in the tail are sent."""

    def __init__(self, key: str, offset: int) -> None:
        self.key = key
        self.client, self.bucket, self.name = _client_and_key(key)
        self.upload_id = str(_multipart_id(self.client, self.bucket, self.name, create=True))
        self.parts = _full_parts(_parts(self.client, self.bucket, self.name, self.upload_id))
        start = len(self.parts) * part_size()
        self.part = len(self.parts) + 1
        path = self._recover_tail(start)
        self.handle: BinaryIO = path.open("r+b")
        self.tail_start = start
        if offset < start or path.stat().st_size < offset - start:
            self.handle.close()
            raise RuntimeError(f"Upload {key}: stored parts and tail do not reach {offset}.")
        self.cut_back(offset)
        self.flush_parts()

    def _recover_tail(self, start: int) -> Path:
        tails = {n: p for n, p in tail_files(self.key).items() if n <= self.part}
        if not tails:
            path = _tail_path(self.key, self.part)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
            return path
        first = max(tails)
        return _roll(self.key, tails[first], (self.part - first) * part_size(), self.part)

    def write(self, data: bytes) -> None:
        self.handle.write(data)

    def make_durable(self) -> None:
        _durable(self.handle)

    def cut_back(self, offset: int) -> None:
        self.handle.flush()
        self.handle.truncate(offset - self.tail_start)
        self.handle.seek(offset - self.tail_start)

    def part_ready(self) -> bool:
        return self.handle.tell() >= part_size()

    def flush_parts(self) -> None:
        """Send the whole parts in the tail (their offset is saved), then roll the tail."""
        size = part_size()
        end = self.handle.tell()
        self.handle.flush()
        sent = 0
        with _tail_path(self.key, self.part).open("rb") as reader:
            while end - sent >= size:
                reader.seek(sent)
                number = self.part + sent // size
                answer = self.client.upload_part(
                    Bucket=self.bucket,
                    Key=self.name,
                    UploadId=self.upload_id,
                    PartNumber=number,
                    Body=reader.read(size),
                )
                self.parts.append({"PartNumber": number, "ETag": answer["ETag"], "Size": size})
                sent += size
        if not sent:
            return
        old = _tail_path(self.key, self.part)
        self.handle.close()
        self.part += sent // size
        self.tail_start += sent
        path = _roll(self.key, old, sent, self.part)
        self.handle = path.open("r+b")
        self.handle.seek(0, os.SEEK_END)

    def after_save(self, *, complete: bool) -> None:
        self.flush_parts()
        if complete:
            self.handle.close()
            finish(self.key)

    def close(self) -> None:
        self.handle.close()


def finish(key: str) -> None:
    """Complete the key's multipart upload with the tail as its last part, then remove the
    tail. Idempotent: with no multipart upload left the object is already whole."""
    client, bucket, name = _client_and_key(key)
    upload_id = _multipart_id(client, bucket, name, create=False)
    if upload_id is None:
        return
    parts = _full_parts(_parts(client, bucket, name, upload_id))
    number = len(parts) + 1
    tails = {n: p for n, p in tail_files(key).items() if n <= number}
    last = b""
    if tails:
        path = _roll(key, tails[max(tails)], (number - max(tails)) * part_size(), number)
        last = path.read_bytes()
    if last or not parts:
        answer = client.upload_part(
            Bucket=bucket, Key=name, UploadId=upload_id, PartNumber=number, Body=last
        )
        parts.append({"PartNumber": number, "ETag": answer["ETag"]})
    client.complete_multipart_upload(
        Bucket=bucket,
        Key=name,
        UploadId=upload_id,
        MultipartUpload={
            "Parts": [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]} for p in parts]
        },
    )
    _remove_tails(key)


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
