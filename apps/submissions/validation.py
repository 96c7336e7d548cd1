"""File rules of SPEC §4: names, extensions and archive contents. Pure checks, no I/O but
reading the local file they are given."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from django.conf import settings

from apps.core.archives import UNSAFE, ArchiveError, archive_kind, check_archive
from apps.core.validation import name_display_problem
from apps.submissions.exceptions import (
    InvalidArchive,
    InvalidExtension,
    InvalidFilename,
    UnsafeArchive,
)

MAX_FILENAME_BYTES = 255
_DRIVE = re.compile(r"^[A-Za-z]:")


def filename_problem(name: str) -> str | None:
    """Why `name` is not a plain base name shown as what it is, or None when it is: the rule of
    every accepted file name (uploads, the entry point and config file). Characters that would
    disguise the name are `apps.core.validation.name_display_problem`'s."""
    if not name or not name.strip():
        return "The file name is empty."
    if name in {".", ".."}:
        return "The file name cannot be '.' or '..'."
    if "/" in name or "\\" in name:
        return "The file name cannot contain '/' or '\\' (send a plain base name, no folders)."
    if ".." in name:
        return "The file name cannot contain '..'."
    if any(0xD800 <= ord(char) <= 0xDFFF for char in name):
        return "The file name is not valid UTF-8."
    display = name_display_problem(name)
    if display is not None:
        return f"The file name contains {display}."
    if len(name.encode("utf-8")) > MAX_FILENAME_BYTES:
        return f"The file name is longer than {MAX_FILENAME_BYTES} UTF-8 bytes."
    if _DRIVE.match(name):
        return "The file name cannot start with a drive letter."
    return None


def accepted_extensions(file_types: Sequence[str] | None = None) -> list[str]:
    """The extensions a submission's files may have: its own `file_types` (a phase's), or
    `ALLOWED_UPLOAD_EXTENSIONS` when it has none."""
    chosen = file_types if file_types else settings.ALLOWED_UPLOAD_EXTENSIONS
    return [str(s) for s in chosen]


def allowed_extension(name: str, file_types: Sequence[str] | None = None) -> str | None:
    """The accepted suffix `name` ends with (compared case-insensitively), or None.

    Suffixes are matched whole (`.tar.gz` is one suffix; `os.path.splitext` would see `.gz`).
    `file_types` as in `accepted_extensions`.
    """
    lowered = name.lower()
    suffixes = sorted((s.lower() for s in accepted_extensions(file_types)), key=len, reverse=True)
    for suffix in suffixes:
        if suffix and lowered.endswith(suffix):
            return suffix
    return None


def validate_name(name: str) -> None:
    """The name rules alone (`invalid_filename`)."""
    problem = filename_problem(name)
    if problem is not None:
        raise InvalidFilename(problem, extra={"filename": name.encode("utf-8", "replace").decode()})


def validate_extension(name: str, file_types: Sequence[str] | None = None) -> None:
    """The extension rule (`invalid_extension`) for a name that passed `validate_name`;
    `file_types` as in `accepted_extensions`."""
    suffix = allowed_extension(name, file_types)
    if suffix is None:
        allowed = ", ".join(accepted_extensions(file_types))
        raise InvalidExtension(
            f"'{name}' has an extension that is not accepted (allowed: {allowed}).",
            extra={"filename": name},
        )
    if len(name) == len(suffix):
        raise InvalidFilename(
            f"'{name}' has no name before its extension.", extra={"filename": name}
        )


def validate_filename(name: str, file_types: Sequence[str] | None = None) -> None:
    """Name rules first (`invalid_filename`), then the extension rule (`invalid_extension`)."""
    validate_name(name)
    validate_extension(name, file_types)


def validate_archive(*, path: Path, filename: str) -> None:
    """`.zip` / `.tar.gz`: readable (`invalid_archive`); at most `MAX_ARCHIVE_MEMBERS` plain
    files and folders at safe relative paths, no header field over 64 KiB, at most
    `GRADING_MAX_UNPACKED_SIZE` bytes unpacked, a zip end record that agrees with its central
    directory (`unsafe_archive`). Other files pass untouched.

    The rules and the readers are `apps.core.archives`', the same ones the grader unpacks
    with: a tar.gz is read by `tarfile` itself, its header extensions bounded before they
    are read; a zip's members are counted from its central directory.
    """
    kind = archive_kind(filename)
    if kind is None:
        return
    try:
        check_archive(
            path,
            kind,
            max_members=int(settings.MAX_ARCHIVE_MEMBERS),
            max_unpacked=int(settings.GRADING_MAX_UNPACKED_SIZE),
        )
    except ArchiveError as exc:
        extra: dict[str, str] = {"filename": filename}
        if exc.member is not None:
            extra["member"] = exc.member
        if exc.kind == UNSAFE:
            raise UnsafeArchive(
                f"'{filename}': {exc} Only plain files and folders with relative paths inside "
                "the archive are accepted.",
                extra=extra,
            ) from exc
        raise InvalidArchive(f"'{filename}': {exc}", extra=extra) from exc
