"""Step 1: the files to send, and what the server would refuse, checked before any request."""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from yoyaku_client.errors import YoyakuError

DEFAULT_EXTENSIONS = (".py", ".yaml", ".zip", ".tar.gz")
MAX_FILE_SIZE = 104_857_600
MAX_FILES = 100
_SKIPPED_DIRS = {"__pycache__", "node_modules"}
# The server's display rule for names: characters that draw as `/` or `\`, and the
# categories of invisible characters (controls, format characters, line separators).
_SLASH_LOOKALIKES = frozenset(
    "\u2044\u2215\u2216\u2571\u2572\u27cb\u27cd\u29f5\u29f8\u29f9\ufe68\uff0f\uff3c"
)
_HIDDEN_CATEGORIES = {"Cc", "Cf", "Zl", "Zp"}


def allowed_extensions() -> tuple[str, ...]:
    """The server's ALLOWED_UPLOAD_EXTENSIONS (its default unless YOYAKU_ALLOWED_EXTENSIONS
    names another list, for a server configured differently)."""
    raw = os.environ.get("YOYAKU_ALLOWED_EXTENSIONS", "")
    items = [e.strip().lower() for e in raw.split(",") if e.strip()]
    return tuple(e if e.startswith(".") else f".{e}" for e in items) or DEFAULT_EXTENSIONS


def max_file_size() -> int:
    raw = os.environ.get("YOYAKU_MAX_FILE_SIZE", "")
    return int(raw) if raw.isdigit() else MAX_FILE_SIZE


class LocalRefusal(YoyakuError):
    """The files would be refused by the server: nothing was sent."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


@dataclass
class LocalFile:
    """A file to send: where it is, its name on the server, its size and hash."""

    path: Path
    name: str
    size: int
    sha256: str = ""


def _has_allowed_extension(name: str, extensions: Sequence[str]) -> bool:
    lower = name.lower()
    return any(lower.endswith(ext) and len(lower) > len(ext) for ext in extensions)


def name_problem(name: str) -> str | None:
    """The server's name rule (a plain base name), checked before the extension."""
    if name in {"", ".", ".."} or "/" in name or "\\" in name or ".." in name:
        return "not a plain file name"
    if any(unicodedata.category(c) == "Cc" for c in name):
        return "control characters in the name"
    for char in name:
        if char in _SLASH_LOOKALIKES or unicodedata.category(char) in _HIDDEN_CATEGORIES:
            return f"U+{ord(char):04X} in the name (invisible, or looks like '/' or '\\')"
    folded = unicodedata.normalize("NFKC", name)
    if "/" in folded or "\\" in folded or ".." in folded:
        return "reads as a path once normalised (NFKC)"
    if len(name.encode("utf-8")) > 255:
        return "longer than 255 bytes"
    if len(name) >= 2 and name[1] == ":" and name[0].isalpha():
        return "starts with a drive letter"
    return None


def collect_files(
    paths: Sequence[Path], *, extensions: Sequence[str] | None = None
) -> tuple[list[LocalFile], list[Path]]:
    """The files to send, in order, and the files of walked folders left out.

    A named file is always taken (and checked). A folder is walked in name order: files with
    an allowed extension are taken, others are left out (and listed); hidden entries and
    `__pycache__` are ignored; a sub-folder holding files to send is refused, because the
    server stores plain names (pack it as a .zip or .tar.gz).
    """
    extensions = tuple(extensions) if extensions else allowed_extensions()
    files: list[LocalFile] = []
    left_out: list[Path] = []
    problems: list[str] = []
    for given in paths:
        if given.is_dir():
            for entry in sorted(given.iterdir(), key=lambda p: p.name):
                if entry.name.startswith(".") or entry.name in _SKIPPED_DIRS:
                    continue
                if entry.is_dir():
                    nested = [
                        p
                        for p in entry.rglob("*")
                        if p.is_file() and _has_allowed_extension(p.name, extensions)
                    ]
                    if nested:
                        problems.append(
                            f"{entry}: sub-folders cannot be uploaded (the server keeps plain "
                            "file names); pack it as a .zip or .tar.gz"
                        )
                    continue
                if entry.is_file():
                    if _has_allowed_extension(entry.name, extensions):
                        files.append(LocalFile(entry, entry.name, entry.stat().st_size))
                    else:
                        left_out.append(entry)
        elif given.is_file():
            files.append(LocalFile(given, given.name, given.stat().st_size))
        else:
            problems.append(f"{given}: no such file or folder")
    if problems:
        raise LocalRefusal(problems)
    return files, left_out


def check_files(
    files: Sequence[LocalFile],
    *,
    entrypoint: str,
    config_file: str,
    extensions: Sequence[str] | None = None,
    sizes: bool = True,
) -> None:
    """Refuse, before any request, what the server would refuse. With `extensions` (a
    predictions phase's file types) there is no program: no entrypoint or config file.
    `sizes=False` leaves the sizes to `check_sizes` (once the server's limits are known)."""
    program = not extensions
    extensions = tuple(extensions) if extensions else allowed_extensions()
    limit = max_file_size() if sizes else None
    problems: list[str] = []
    if not files:
        problems.append("no files to send")
    seen: dict[str, Path] = {}
    for item in files:
        problem = name_problem(item.name)
        if problem is None and not _has_allowed_extension(item.name, extensions):
            problem = f"extension not allowed (allowed: {' '.join(extensions)})"
        if problem is None and limit is not None and item.size > limit:
            problem = f"{item.size} bytes, more than the limit of {limit}"
        if problem is None and item.name.lower() in seen:
            problem = f"same name as {seen[item.name.lower()]} (names are compared ignoring case)"
        if problem:
            problems.append(f"{item.path}: {problem}")
        seen.setdefault(item.name.lower(), item.path)
    if len(files) > MAX_FILES:
        problems.append(f"{len(files)} files: a submission holds at most {MAX_FILES}")
    names = {f.name for f in files}
    for role, name in (("entrypoint", entrypoint), ("config file", config_file)):
        if program and files and name not in names:
            problems.append(f"the {role} {name!r} is not among the files")
    if problems:
        raise LocalRefusal(problems)


def check_sizes(files: Sequence[LocalFile], *, max_size: int, resumable_max: int | None) -> None:
    """Refuse files over the server's limits: above `max_size` a file goes resumably, up to
    `resumable_max` (None: the server has no resumable uploads). When every file is over
    `max_size`, the draft is created from the first one's resumable upload."""
    problems: list[str] = []
    for item in files:
        if item.size <= max_size:
            continue
        if resumable_max is None:
            problems.append(f"{item.path}: {item.size} bytes, more than the limit of {max_size}")
        elif item.size > resumable_max:
            problems.append(
                f"{item.path}: {item.size} bytes, more than the limit of {resumable_max} "
                "for a resumable upload"
            )
    if problems:
        raise LocalRefusal(problems)
