"""The one set of archive rules, used by the upload check and by the grader's unpacking.

An archive is safe when it holds at most `max_members` members, each a plain file or folder
at a relative path inside the archive, unpacking to at most `max_unpacked` bytes, with no
header field (GNU long name or long link, pax record) larger than `MAX_HEADER_FIELD`.

The check reads an archive exactly as the unpacking does, through the same readers
(`apps.core.archive_readers`): a `.tar.gz` through `tarfile` itself, whose header extensions
are bounded before `tarfile` reads them, so a header `tarfile` accepts (signed or unsigned
checksum, GNU or pax) can never end the check early while the unpacking reads on; a zip by
walking its central directory as `zipfile` finds it, never trusting the end record's count.
The unpacking applies every rule again while it writes, and its `Budget` counts each byte and
each file or folder it creates. Memory stays bounded by one header field and one member.

Plain Python, no Django: limits come in as arguments.
"""

from __future__ import annotations

import re
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from apps.core.archive_readers.errors import INVALID, UNSAFE, ArchiveError
from apps.core.archive_readers.tar import MAX_HEADER_FIELD, tar_members
from apps.core.archive_readers.zip import zip_directory_count
from apps.core.validation import contains_nul, name_display_problem

__all__ = [
    "INVALID",
    "MAX_HEADER_FIELD",
    "MAX_MEMBER_DEPTH",
    "UNSAFE",
    "ArchiveError",
    "ArchiveMember",
    "Budget",
    "archive_kind",
    "archive_members",
    "check_archive",
    "member_problem",
    "member_target",
    "unpack_archive",
]

CHUNK = 1024 * 1024
# Listing a stored archive counts no bytes: the upload check bounded them already.
_NO_LIMIT = 1 << 62
_DRIVE = re.compile(r"^[A-Za-z]:")
#: Folders a member's path may pass through. The grader walks what it unpacks with Python
#: 3.11's recursive `os.walk` and `shutil.rmtree`: 1,500 levels were a RecursionError.
MAX_MEMBER_DEPTH = 64


def archive_kind(name: str) -> str | None:
    lowered = name.lower()
    if lowered.endswith(".zip"):
        return "zip"
    if lowered.endswith((".tar.gz", ".tgz")):
        return "tar.gz"
    return None


def member_problem(name: str) -> str | None:
    """Why a member name is not a relative path inside the archive, or None."""
    if not name:
        return "an empty member name"
    if contains_nul(name):
        return "a member name with NUL"
    if name.startswith(("/", "\\")) or _DRIVE.match(name):
        return f"an absolute path ({name})"
    parts = [part for part in re.split(r"[/\\]+", name) if part not in ("", ".")]
    if ".." in parts:
        return f"a path that leaves the archive ({name})"
    if not parts:
        return f"a member with no name ({name})"
    if len(parts) > MAX_MEMBER_DEPTH + 1:
        return f"a path deeper than {MAX_MEMBER_DEPTH} folders ({name[:200]}...)"
    shown = name_display_problem(name, path=True)
    return None if shown is None else f"a member name with {shown} ({name!r})"


def member_target(root: Path, name: str) -> Path:
    """Where a member goes under `root`; ArchiveError for a name `member_problem` refuses."""
    problem = member_problem(name)
    if problem is not None:
        raise ArchiveError(f"The archive contains {problem}.", kind=UNSAFE, member=name)
    parts = [p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("", ".")]
    return root.joinpath(*parts)


# --- tar ----------------------------------------------------------------------------------


def _tar_member_problem(info: tarfile.TarInfo) -> str | None:
    if info.issym() or info.islnk():
        return f"a link ({info.name})"
    if not (info.isfile() or info.isdir()):
        return f"a device, FIFO or other special file ({info.name})"
    return member_problem(info.name)


def _tar_checked(
    path: Path, *, max_members: int, max_unpacked: int
) -> Iterator[tuple[tarfile.TarFile, tarfile.TarInfo]]:
    """Each member as `tarfile` yields it, refused at the first broken rule: member
    `max_members + 1`, a link or special file, an unsafe name, bytes past `max_unpacked`."""
    unpacked = 0
    for members, (archive, info) in enumerate(tar_members(path), start=1):
        if members > max_members:
            raise ArchiveError(f"The archive has more than {max_members} members.", kind=UNSAFE)
        problem = _tar_member_problem(info)
        if problem is not None:
            raise ArchiveError(f"The archive contains {problem}.", kind=UNSAFE, member=info.name)
        if info.size < 0:
            raise ArchiveError("The archive has a negative size.", kind=INVALID)
        if info.isfile():
            unpacked += info.size
            if unpacked > max_unpacked:
                raise ArchiveError(
                    f"The archive holds more than {max_unpacked} bytes once unpacked.",
                    kind=UNSAFE,
                )
        yield archive, info


# --- zip ----------------------------------------------------------------------------------


def _zip_member_problem(info: zipfile.ZipInfo) -> str | None:
    # Unix type bits, when the archiver recorded them (0 = not recorded: a plain entry).
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
        return f"a link or special file ({info.filename})"
    return member_problem(info.filename)


def _zip_checked(
    archive: zipfile.ZipFile, *, counted: int, max_unpacked: int
) -> Iterator[zipfile.ZipInfo]:
    """Each entry `zipfile` read, refused at the first broken rule. `counted` is the central
    directory walk's count; `zipfile` reading another number would mean the two disagree."""
    entries = archive.infolist()
    if len(entries) != counted:
        raise ArchiveError(
            f"The archive's central directory reads as {counted} and {len(entries)} members.",
            kind=UNSAFE,
        )
    declared = 0
    for info in entries:
        problem = _zip_member_problem(info)
        if problem is not None:
            raise ArchiveError(
                f"The archive contains {problem}.", kind=UNSAFE, member=info.filename
            )
        declared += info.file_size
        if declared > max_unpacked:
            raise ArchiveError(
                f"The archive holds more than {max_unpacked} bytes once unpacked.", kind=UNSAFE
            )
        yield info


# --- The two uses -----------------------------------------------------------------------------

_READ_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    tarfile.TarError,
    EOFError,
    zlib.error,
    OSError,
    ValueError,
    NotImplementedError,
    UnicodeDecodeError,
)


def check_archive(path: Path, kind: str, *, max_members: int, max_unpacked: int) -> None:
    """Refuse an archive that breaks a rule (ArchiveError `unsafe`) or cannot be read
    (`invalid`). Nothing is written; a tar.gz is decompressed once as far as `tarfile`
    reads, a zip not at all."""
    try:
        if kind == "zip":
            counted = zip_directory_count(path, max_members=max_members)
            with zipfile.ZipFile(path) as archive:
                for _ in _zip_checked(archive, counted=counted, max_unpacked=max_unpacked):
                    pass
            return
        for _ in _tar_checked(path, max_members=max_members, max_unpacked=max_unpacked):
            pass
    except ArchiveError:
        raise
    except _READ_ERRORS as exc:
        raise ArchiveError(
            f"The archive is not a readable {kind} archive ({type(exc).__name__}).", kind=INVALID
        ) from exc


class Budget:
    """Bytes written, and files and folders created, while preparing a folder, against limits
    (`max_entries` None: no limit on entries)."""

    def __init__(self, limit: int, *, max_entries: int | None = None) -> None:
        self.limit = limit
        self.used = 0
        self.max_entries = max_entries
        self.entries = 0

    def entries_cap(self, maximum: int) -> None:
        """From now on, create at most `maximum` files and folders."""
        self.max_entries = maximum
        self.entries = 0

    def _entry_add(self) -> None:
        self.entries += 1
        if self.max_entries is not None and self.entries > self.max_entries:
            raise ArchiveError(
                f"Unpacking would create more than {self.max_entries} files and folders.",
                kind=UNSAFE,
            )

    def folder(self, target: Path) -> None:
        """Create the folder `target` and its missing parents, counting each one created."""
        missing: list[Path] = []
        current = target
        while not current.is_dir():
            missing.append(current)
            current = current.parent
        for folder in reversed(missing):
            self._entry_add()
            folder.mkdir()

    def copy(self, source: IO[bytes], target: Path) -> None:
        """Stream `source` into a new file `target` (never overwriting, never following a
        link), counting every byte."""
        if target.exists() or target.is_symlink():
            raise ArchiveError(
                f"Archive member {target.name!r} would overwrite a file.", kind=UNSAFE
            )
        self.folder(target.parent)
        self._entry_add()
        with target.open("xb") as out:
            while chunk := source.read(CHUNK):
                self.used += len(chunk)
                if self.used > self.limit:
                    raise ArchiveError(
                        f"The unpacked files exceed {self.limit} bytes.", kind=UNSAFE
                    )
                out.write(chunk)


def _unpack_zip(path: Path, root: Path, *, budget: Budget, max_members: int) -> None:
    counted = zip_directory_count(path, max_members=max_members)
    with zipfile.ZipFile(path) as archive:
        for info in _zip_checked(archive, counted=counted, max_unpacked=budget.limit):
            target = member_target(root, info.filename)
            if info.is_dir():
                budget.folder(target)
                continue
            with archive.open(info) as source:
                budget.copy(source, target)


def _unpack_tar(path: Path, root: Path, *, budget: Budget, max_members: int) -> None:
    for archive, member in _tar_checked(path, max_members=max_members, max_unpacked=budget.limit):
        target = member_target(root, member.name)
        if member.isdir():
            budget.folder(target)
            continue
        data = archive.extractfile(member)
        if data is None:
            raise ArchiveError(f"Archive member {member.name!r} cannot be read.", kind=INVALID)
        with data:
            budget.copy(data, target)


def unpack_archive(path: Path, root: Path, *, budget: Budget, max_members: int) -> None:
    """Check `path` with the same rules as an upload, then unpack it under `root` through the
    same readers, applying every rule again as it goes: plain files and folders only, at most
    `max_members` members, every byte and every file or folder created counted by `budget`."""
    kind = archive_kind(path.name)
    if kind is None:
        raise ArchiveError(f"{path.name} is not an archive.", kind=INVALID)
    check_archive(path, kind, max_members=max_members, max_unpacked=budget.limit)
    try:
        if kind == "zip":
            _unpack_zip(path, root, budget=budget, max_members=max_members)
        else:
            _unpack_tar(path, root, budget=budget, max_members=max_members)
    except ArchiveError:
        raise
    except _READ_ERRORS as exc:
        raise ArchiveError(
            f"Cannot unpack {path.name}: {type(exc).__name__}: {exc}", kind=INVALID
        ) from exc


# --- Listing (what a reader of a stored archive sees) ------------------------------------------


@dataclass(frozen=True)
class ArchiveMember:
    name: str
    size: int
    kind: str  # "file" or "folder"


def archive_members(path: Path, kind: str, *, max_members: int) -> list[ArchiveMember]:
    """The members of an archive, in archive order, read through the same checks as the upload
    (`ArchiveError` for one they refuse). A zip's central directory is read, no member data;
    a tar.gz is decompressed as far as `tarfile` reads, member data skipped and never kept."""
    try:
        if kind == "zip":
            counted = zip_directory_count(path, max_members=max_members)
            with zipfile.ZipFile(path) as archive:
                return [
                    ArchiveMember(
                        info.filename,
                        0 if info.is_dir() else info.file_size,
                        "folder" if info.is_dir() else "file",
                    )
                    for info in _zip_checked(archive, counted=counted, max_unpacked=_NO_LIMIT)
                ]
        return [
            ArchiveMember(
                info.name, info.size if info.isfile() else 0, "file" if info.isfile() else "folder"
            )
            for _, info in _tar_checked(path, max_members=max_members, max_unpacked=_NO_LIMIT)
        ]
    except ArchiveError:
        raise
    except _READ_ERRORS as exc:
        raise ArchiveError(
            f"The archive is not a readable {kind} archive ({type(exc).__name__}).", kind=INVALID
        ) from exc
