"""The worker's cache of bundle folders: extracted once per digest from the stored bundle,
never seen half-extracted by a concurrent worker, private, bounded, and refusing a bundle
that breaks the archive rules."""

from __future__ import annotations

import io
import os
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from apps.core.archives import ArchiveError
from apps.grading.bundle_cache import bundle_folders_materialize, cache_key
from apps.grading.phases import BundleFolder

FILES = {f"data/ref/part{i}.csv": (f"row {i}\n" * 2000).encode() for i in range(40)}


def _stored_zip(members: dict[str, bytes]) -> str:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return default_storage.save("bundles/test/bundle.zip", ContentFile(buffer.getvalue()))


@pytest.fixture
def cache(settings: Any, tmp_path: Path) -> Path:
    settings.GRADING_BUNDLE_CACHE = str(tmp_path / "cache")
    return tmp_path / "cache"


def test_a_folder_is_extracted_once_private_and_readable_by_the_sandbox(cache: Path) -> None:
    stored = _stored_zip({**FILES, "scoring/score.py": b"print(1)\n"})
    ref = BundleFolder(stored, "data/ref/", "d1")
    [path] = bundle_folders_materialize([ref])
    assert sorted(p.name for p in path.iterdir()) == sorted(n.split("/")[-1] for n in FILES)
    assert (path / "part3.csv").read_bytes() == FILES["data/ref/part3.csv"]
    assert not (path / "score.py").exists()  # only the folder asked for
    assert (path / "part3.csv").stat().st_mode & 0o777 == 0o644
    assert cache.stat().st_mode & 0o777 == 0o711  # reachable by any sandbox uid, not listable
    assert (cache / ".secret").stat().st_mode & 0o777 == 0o600
    inode = path.stat().st_ino
    default_storage.delete(stored)  # a second use reads nothing from storage
    assert bundle_folders_materialize([ref]) == [path]
    assert path.stat().st_ino == inode


def test_concurrent_workers_never_see_a_half_extracted_folder(cache: Path) -> None:
    stored = _stored_zip(FILES)
    ref = BundleFolder(stored, "data/ref/", "d2")
    target = cache / cache_key(ref)
    barrier = threading.Barrier(8)
    seen: list[int] = []
    results: list[Path] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if target.is_dir():
                seen.append(len(list(target.iterdir())))
            time.sleep(0.0005)

    def work() -> None:
        barrier.wait()
        results.extend(bundle_folders_materialize([ref]))

    watcher = threading.Thread(target=watch)
    watcher.start()
    workers = [threading.Thread(target=work) for _ in range(8)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    done.set()
    watcher.join()
    assert results == [target] * 8
    assert seen
    assert set(seen) == {len(FILES)}
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == [".secret"]


@pytest.mark.parametrize("name", ["data/ref/../../escape.txt", "/data/ref/abs.txt"])
def test_a_bundle_that_breaks_the_archive_rules_is_refused(cache: Path, name: str) -> None:
    stored = _stored_zip({"data/ref/ok.csv": b"1\n", name: b"x"})
    with pytest.raises(ArchiveError):
        bundle_folders_materialize([BundleFolder(stored, "data/ref/", "d3")])
    assert not list(cache.glob("*/ok.csv"))
    assert not (cache.parent / "escape.txt").exists()


def test_the_cache_drops_least_recently_used_folders_past_its_size(
    cache: Path, settings: Any
) -> None:
    settings.GRADING_BUNDLE_CACHE_SIZE = 300_000  # room for two of these folders
    stored = _stored_zip({f"f{n}/data.bin": os.urandom(120_000) for n in range(4)})
    paths = []
    for n in range(3):
        [path] = bundle_folders_materialize([BundleFolder(stored, f"f{n}/", f"x{n}")])
        old = time.time() - 7200 + n
        os.utime(path, (old, old))  # unused for two hours
        paths.append(path)
    [newest] = bundle_folders_materialize([BundleFolder(stored, "f3/", "x3")])
    assert newest.is_dir()
    assert [p.is_dir() for p in paths] == [False, False, True]
