"""A phase's public data as a zip of its own: the public folder of the stored bundle, and
nothing else of it (never the reference data or the scoring program)."""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import IO

from django.contrib.auth.models import AbstractBaseUser
from django.core.files.storage import storages

from apps.benchmarks.selectors import challenge_get_visible
from apps.benchmarks.services.bundle_archive import BundleArchive
from apps.core.exceptions import NotFound

_CHUNK = 1024 * 1024


def phase_public_data(*, user: AbstractBaseUser, slug: str, phase_slug: str) -> IO[bytes]:
    """A temporary file (deleted when closed) holding a zip of the phase's public data.
    NotFound when the caller may not see the challenge, or the phase has no public data."""
    challenge = challenge_get_visible(slug=slug, user=user)
    phase = next((p for p in challenge.phases.all() if p.slug == phase_slug), None)
    if phase is None or not phase.public_data:
        raise NotFound("This phase has no public data.")
    with tempfile.TemporaryDirectory(prefix="yoyaku-bundle-") as folder:
        local = Path(folder) / "bundle.zip"
        with (
            storages["default"].open(challenge.bundle_file, "rb") as source,
            local.open("wb") as out,
        ):
            shutil.copyfileobj(source, out, _CHUNK)
        result = tempfile.TemporaryFile()  # noqa: SIM115 - handed to the response, which closes it
        with (
            BundleArchive(local) as archive,
            zipfile.ZipFile(result, "w", compression=zipfile.ZIP_DEFLATED) as out_zip,
        ):
            for relative, member in archive.files_under(phase.public_data):
                with archive.open_member(member) as data, out_zip.open(relative, "w") as target:
                    shutil.copyfileobj(data, target, _CHUNK)
    result.seek(0)
    return result
