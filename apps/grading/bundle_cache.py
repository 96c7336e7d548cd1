"""The worker's local copy of the bundle folders a phase's stages read (scoring program,
reference data, input data), extracted from the stored bundle (`default_storage`) once per
digest and reused by every grading on this host.

- Safe: the zip is checked with the upload's archive rules (`apps.core.archives`) before a
  member is read, every member is written through the same `Budget` (no link, no path out of
  the folder, bounded bytes and entries), files end 0644 and folders 0755.
- Atomic: a folder is extracted under a temporary name in the cache and renamed into place,
  so a concurrent worker sees it whole or not at all; two workers extracting the same folder
  at once both succeed and one copy is kept.
- Private: the cache root is 0711, so the sandbox's uid (which differs per worker process
  under a root worker) can reach a folder it is given but nobody can list the cache; a folder's
  name is keyed with a random secret kept in the cache (0600), so no other host user can name
  the folder that holds a phase's reference data.
- Bounded: after an extraction, the least recently used folders not used for an hour are
  removed until the cache holds at most GRADING_BUNDLE_CACHE_SIZE bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from django.conf import settings
from django.core.files.storage import default_storage

from apps.core.archives import Budget, check_archive, member_target
from apps.grading.phases import BundleFolder

_SIZE_SUFFIX = ".bytes"
_KEY_FILE = ".secret"  # the random secret folder names are keyed with
_IN_USE_SECONDS = 3600.0


def cache_root() -> Path:
    """The cache folder, created on first use (0711: traversable, not listable)."""
    configured = str(settings.GRADING_BUNDLE_CACHE)
    root = Path(configured) if configured else Path(tempfile.gettempdir()) / "yoyaku-bundles"
    root.mkdir(mode=0o711, parents=True, exist_ok=True)
    if root.stat().st_mode & 0o777 != 0o711:
        os.chmod(root, 0o711)  # noqa: S103 - traversal only: the names are secret
    return root


def _cache_secret(root: Path) -> bytes:
    """The cache's random secret, created once (atomically: written aside, then linked)."""
    path = root / _KEY_FILE
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    handle, name = tempfile.mkstemp(prefix=".secret-", dir=root)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(os.urandom(32).hex().encode())
        with contextlib.suppress(FileExistsError):
            os.link(name, path)  # the first worker's secret wins
    finally:
        os.unlink(name)
    return path.read_bytes()


def cache_key(folder: BundleFolder) -> str:
    """The folder's name in the cache: unguessable without the cache's secret."""
    secret = _cache_secret(cache_root())
    text = f"{folder.bundle_file}\0{folder.folder}\0{folder.digest}".encode()
    return hashlib.sha256(secret + b"\0" + text).hexdigest()[:40]


def bundle_folders_materialize(folders: Sequence[BundleFolder]) -> list[Path]:
    """The local folder of each of `folders`, extracted when missing (one download per
    bundle). Raises ArchiveError for a bundle that breaks the archive rules, OSError when it
    cannot be read."""
    root = cache_root()
    paths = [root / cache_key(folder) for folder in folders]
    missing = [f for f, p in zip(folders, paths, strict=True) if not p.is_dir()]
    by_bundle: dict[str, list[BundleFolder]] = {}
    for folder in missing:
        by_bundle.setdefault(folder.bundle_file, []).append(folder)
    for bundle_file, wanted in by_bundle.items():
        with _bundle_downloaded(bundle_file, root) as zip_path:
            for folder in wanted:
                _folder_extract(zip_path, folder, root)
    now = time.time()
    for path in paths:
        with contextlib.suppress(OSError):
            os.utime(path, (now, now))
    if missing:
        cache_trim(root, keep=set(paths))
    return paths


@contextlib.contextmanager
def _bundle_downloaded(bundle_file: str, root: Path) -> Iterator[Path]:
    """The stored bundle copied to a private file in the cache folder (removed on exit)."""
    handle, name = tempfile.mkstemp(prefix=".zip-", dir=root)
    path = Path(name)
    try:
        with os.fdopen(handle, "wb") as out, default_storage.open(bundle_file, "rb") as source:
            shutil.copyfileobj(source, out, 1024 * 1024)
        check_archive(
            path,
            "zip",
            max_members=int(settings.MAX_ARCHIVE_MEMBERS),
            max_unpacked=int(settings.MAX_BUNDLE_UNPACKED_SIZE),
        )
        yield path
    finally:
        path.unlink(missing_ok=True)


def _folder_extract(zip_path: Path, folder: BundleFolder, root: Path) -> None:
    """Extract `folder` of the zip to a temporary name, then rename it into place."""
    final = root / cache_key(folder)
    work = Path(tempfile.mkdtemp(prefix=".part-", dir=root))
    try:
        budget = Budget(int(settings.MAX_BUNDLE_UNPACKED_SIZE))
        budget.entries_cap(int(settings.MAX_ARCHIVE_MEMBERS))
        prefix = folder.folder
        with zipfile.ZipFile(zip_path) as archive:
            for info in archive.infolist():
                name = info.filename.replace("\\", "/")
                while name.startswith("./"):
                    name = name[2:]
                if info.is_dir() or not name.startswith(prefix) or name == prefix:
                    continue
                target = member_target(work, name[len(prefix) :])
                with archive.open(info) as source:
                    budget.copy(source, target)
        for current, dirs, files in os.walk(work):
            for name in dirs:
                os.chmod(os.path.join(current, name), 0o755)  # noqa: S103 - in the 0700 cache
            for name in files:
                os.chmod(os.path.join(current, name), 0o644)
        os.chmod(work, 0o755)  # noqa: S103 - inside the 0700 cache root
        (root / (final.name + _SIZE_SUFFIX)).write_text(str(budget.used))
        try:
            os.rename(work, final)
        except OSError:
            if not final.is_dir():
                raise
            # Another worker put the same folder in place first: keep theirs.
    finally:
        shutil.rmtree(work, ignore_errors=True)


def cache_trim(root: Path, *, keep: set[Path]) -> None:
    """Remove least recently used folders (not in `keep`, unused for an hour) until the cache
    holds at most GRADING_BUNDLE_CACHE_SIZE bytes. A folder leaves by a rename first, so a
    reader never meets one half removed."""
    cap = int(settings.GRADING_BUNDLE_CACHE_SIZE)
    entries: list[tuple[float, int, Path]] = []
    total = 0
    for path in root.iterdir():
        if path.name.startswith(".") or not path.is_dir():
            continue
        try:
            size = int((root / (path.name + _SIZE_SUFFIX)).read_text())
            used = path.stat().st_mtime
        except (OSError, ValueError):
            continue
        total += size
        entries.append((used, size, path))
    now = time.time()
    for used, size, path in sorted(entries):
        if total <= cap:
            return
        if path in keep or now - used < _IN_USE_SECONDS:
            continue
        trash = root / f".trash-{os.urandom(8).hex()}"
        try:
            os.rename(path, trash)
        except OSError:
            continue
        shutil.rmtree(trash, ignore_errors=True)
        (root / (path.name + _SIZE_SUFFIX)).unlink(missing_ok=True)
        total -= size
