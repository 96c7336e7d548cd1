"""A bundle as a checked zip: its members listed and read through the archive rules.

The zip is checked (`apps.core.archives.check_archive`: central directory walked, plain files
and folders at relative paths only, at most `MAX_ARCHIVE_MEMBERS` members, at most
`MAX_BUNDLE_UNPACKED_SIZE` bytes declared) before any member is read, and nothing is ever
unpacked to disk: a member is read through `zipfile` up to a stated number of bytes.
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path
from typing import IO

from django.conf import settings

from apps.benchmarks.exceptions import InvalidBundle, UnsafeBundle
from apps.core.archives import UNSAFE, ArchiveError, ArchiveMember, archive_members, check_archive

MANIFEST = "challenge.yaml"


def folder_normalize(folder: str) -> str:
    """`data/ref`, `./data/ref/` → `data/ref/` (the form members are compared with)."""
    parts = [part for part in folder.replace("\\", "/").split("/") if part not in ("", ".")]
    return "/".join(parts) + "/" if parts else ""


class BundleArchive:
    """An open, checked bundle. Use as a context manager."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if not zipfile.is_zipfile(path):
            raise InvalidBundle(
                "The bundle is not a zip archive.",
                fields={"bundle": ["must be a .zip archive with challenge.yaml at its root"]},
            )
        try:
            check_archive(
                path,
                "zip",
                max_members=int(settings.MAX_ARCHIVE_MEMBERS),
                max_unpacked=int(settings.MAX_BUNDLE_UNPACKED_SIZE),
            )
            members = archive_members(path, "zip", max_members=int(settings.MAX_ARCHIVE_MEMBERS))
        except ArchiveError as exc:
            if exc.kind == UNSAFE:
                raise UnsafeBundle(str(exc)) from exc
            raise InvalidBundle(str(exc), fields={"bundle": [str(exc)]}) from exc
        self.members: dict[str, ArchiveMember] = {}
        for member in members:
            key = folder_normalize(member.name)
            self.members[key if member.kind == "folder" else key.rstrip("/")] = member
        self._zip = zipfile.ZipFile(path)

    def __enter__(self) -> BundleArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()

    def is_file(self, name: str) -> bool:
        member = self.members.get(name)
        return member is not None and member.kind == "file"

    def has_folder(self, folder: str) -> bool:
        """True when some member lies under `folder` (normalized, ending in "/")."""
        return any(name.startswith(folder) and name != folder for name in self.members) or (
            folder in self.members and self.members[folder].kind == "folder"
        )

    def files_under(self, folder: str) -> list[tuple[str, ArchiveMember]]:
        """(path below `folder`, member) for each file under `folder`, by path."""
        return sorted(
            (
                (name[len(folder) :], member)
                for name, member in self.members.items()
                if name.startswith(folder) and member.kind == "file"
            ),
            key=lambda item: item[0],
        )

    def folder_digest(self, folder: str) -> str:
        """sha256 over each file's name below `folder`, size and CRC-32 (read from the central
        directory: no member data is read)."""
        digest = hashlib.sha256()
        for relative, member in self.files_under(folder):
            info = self._zip.getinfo(member.name)
            digest.update(f"{relative}\0{info.file_size}\0{info.CRC:08x}\n".encode())
        return digest.hexdigest()

    def read(self, name: str, *, max_bytes: int, field: str) -> bytes:
        """The bytes of member `name`; InvalidBundle (keyed by `field`) when it is missing or
        larger than `max_bytes`. Reads at most `max_bytes + 1` bytes."""
        if not self.is_file(name):
            raise InvalidBundle(
                f"The bundle has no file {name}.", fields={field: [f"no file {name} in the bundle"]}
            )
        if self.members[name].size > max_bytes:
            raise InvalidBundle(
                f"{name} is larger than {max_bytes} bytes.",
                fields={field: [f"{name} is larger than {max_bytes} bytes"]},
            )
        try:
            with self.open_member(self.members[name]) as source:
                data = source.read(max_bytes + 1)
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError) as exc:
            raise InvalidBundle(
                f"{name} cannot be read.", fields={field: [f"{name} cannot be read"]}
            ) from exc
        if len(data) > max_bytes:
            raise InvalidBundle(
                f"{name} is larger than {max_bytes} bytes.",
                fields={field: [f"{name} is larger than {max_bytes} bytes"]},
            )
        return data

    def open_member(self, member: ArchiveMember) -> IO[bytes]:
        """A member's bytes, read through `zipfile` (never more than its declared size)."""
        return self._zip.open(self._zip.getinfo(member.name))
