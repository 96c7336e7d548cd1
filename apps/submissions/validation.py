"""File rules of SPEC §4: names, extensions and archive contents. Pure checks, no I/O but
reading the local file they are given."""

from __future__ import annotations

import re
import stat
import tarfile
import unicodedata
import zipfile
import zlib
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings

from apps.submissions.exceptions import (
    InvalidArchive,
    InvalidExtension,
    InvalidFilename,
    UnsafeArchive,
)

MAX_FILENAME_BYTES = 255
_DRIVE = re.compile(r"^[A-Za-z]:")


def filename_problem(name: str) -> str | None:
    """Why `name` is not a plain base name, or None when it is."""
    if not name or not name.strip():
        return "The file name is empty."
    if name in {".", ".."}:
        return "The file name cannot be '.' or '..'."
    if "/" in name or "\\" in name:
        return "The file name cannot contain '/' or '\\' (send a plain base name, no folders)."
    if ".." in name:
        return "The file name cannot contain '..'."
    if any(unicodedata.category(char) == "Cc" for char in name):
        return "The file name cannot contain NUL or control characters."
    if any(0xD800 <= ord(char) <= 0xDFFF for char in name):
        return "The file name is not valid UTF-8."
    if len(name.encode("utf-8")) > MAX_FILENAME_BYTES:
        return f"The file name is longer than {MAX_FILENAME_BYTES} UTF-8 bytes."
    if _DRIVE.match(name):
        return "The file name cannot start with a drive letter."
    return None


def allowed_extension(name: str) -> str | None:
    """The allowed suffix `name` ends with (compared case-insensitively), or None.

    Suffixes are matched whole (`.tar.gz` is one suffix; `os.path.splitext` would see `.gz`).
    """
    lowered = name.lower()
    suffixes = sorted(
        (str(s).lower() for s in settings.ALLOWED_UPLOAD_EXTENSIONS), key=len, reverse=True
    )
    for suffix in suffixes:
        if suffix and lowered.endswith(suffix):
            return suffix
    return None


def validate_filename(name: str) -> None:
    """Name rules first (`invalid_filename`), then the extension rule (`invalid_extension`)."""
    problem = filename_problem(name)
    if problem is not None:
        raise InvalidFilename(problem, extra={"filename": name.encode("utf-8", "replace").decode()})
    suffix = allowed_extension(name)
    if suffix is None:
        allowed = ", ".join(str(s) for s in settings.ALLOWED_UPLOAD_EXTENSIONS)
        raise InvalidExtension(
            f"'{name}' has an extension that is not accepted (allowed: {allowed}).",
            extra={"filename": name},
        )
    if len(name) == len(suffix):
        raise InvalidFilename(
            f"'{name}' has no name before its extension.", extra={"filename": name}
        )


def archive_kind(name: str) -> str | None:
    lowered = name.lower()
    if lowered.endswith(".zip"):
        return "zip"
    if lowered.endswith((".tar.gz", ".tgz")):
        return "tar.gz"
    return None


def _member_path_problem(member: str) -> str | None:
    if not member:
        return "an empty member name"
    if "\x00" in member:
        return "a member name with NUL"
    if member.startswith(("/", "\\")) or _DRIVE.match(member):
        return f"an absolute path ({member})"
    parts = re.split(r"[/\\]+", member)
    if ".." in parts:
        return f"a path that leaves the archive ({member})"
    return None


def _check_members(members: Iterable[tuple[str, str | None]], filename: str) -> None:
    for member, kind_problem in members:
        problem = kind_problem or _member_path_problem(member)
        if problem is not None:
            raise UnsafeArchive(
                f"'{filename}' contains {problem}: only plain files and folders with relative "
                "paths inside the archive are accepted.",
                extra={"filename": filename, "member": member},
            )


def _zip_members(path: Path) -> Iterable[tuple[str, str | None]]:
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            # Unix type bits, when the archiver recorded them (0 = not recorded: a plain entry).
            kind = stat.S_IFMT(info.external_attr >> 16)
            problem = None
            if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
                problem = "a link or special file" + (
                    f" ({info.filename})" if info.filename else ""
                )
            yield info.filename, problem


def _tar_members(path: Path) -> Iterable[tuple[str, str | None]]:
    limit = int(settings.GRADING_MAX_UNPACKED_SIZE)
    unpacked = 0
    with tarfile.open(path, mode="r:gz") as archive:
        for info in archive:
            problem = None
            if info.issym() or info.islnk():
                problem = f"a link ({info.name})"
            elif not (info.isfile() or info.isdir()):
                problem = f"a device, FIFO or other special file ({info.name})"
            unpacked += max(info.size, 0)
            if problem is None and unpacked > limit:
                problem = f"more than {limit} bytes once unpacked"
            yield info.name, problem


def validate_archive(*, path: Path, filename: str) -> None:
    """`.zip` / `.tar.gz`: readable (`invalid_archive`), members plain files and folders at
    safe relative paths (`unsafe_archive`). Other files pass untouched.

    A zip is judged by its central directory (nothing is decompressed); a tar.gz is read
    through once, stopping as soon as a member is refused or the unpacked total passes
    `GRADING_MAX_UNPACKED_SIZE`.
    """
    kind = archive_kind(filename)
    if kind is None:
        return
    members = _zip_members(path) if kind == "zip" else _tar_members(path)
    try:
        _check_members(members, filename)
    except UnsafeArchive:
        raise
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        tarfile.TarError,
        EOFError,
        zlib.error,
        OSError,
        ValueError,
        NotImplementedError,
        UnicodeDecodeError,
    ) as exc:
        raise InvalidArchive(
            f"'{filename}' is not a readable {kind} archive ({type(exc).__name__}).",
            extra={"filename": filename},
        ) from exc
