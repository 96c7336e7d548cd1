"""A bundle folder as a zip: the form `POST /api/challenges/` and the command take."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

_EPOCH = (1980, 1, 1, 0, 0, 0)


def folder_zip(folder: Path, target: Path) -> str:
    """Zip the plain files under `folder` into `target` (paths relative to `folder`, sorted,
    fixed timestamps: the same folder always gives the same bytes); return their sha256.
    Links and special files are left out."""
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_symlink() or not path.is_file():
                continue
            info = zipfile.ZipInfo(path.relative_to(folder).as_posix(), date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with path.open("rb") as source, archive.open(info, "w") as out:
                while chunk := source.read(1024 * 1024):
                    out.write(chunk)
    digest = hashlib.sha256()
    with target.open("rb") as written:
        while chunk := written.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()
