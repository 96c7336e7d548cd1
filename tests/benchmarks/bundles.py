"""Bundles for the tests: the example `digits` bundle as a zip, with its `challenge.yaml`
changed as a test needs."""

from __future__ import annotations

import copy
import io
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from django.contrib.auth.models import Permission, User

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "benchmarks" / "digits"


def example_manifest() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((EXAMPLE / "challenge.yaml").read_text())
    return loaded


def example_files() -> dict[str, bytes]:
    return {
        path.relative_to(EXAMPLE).as_posix(): path.read_bytes()
        for path in sorted(EXAMPLE.rglob("*"))
        if path.is_file()
    }


def zip_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def bundle(
    change: Callable[[dict[str, Any]], None] | None = None,
    *,
    manifest: bytes | None = None,
    extra: dict[str, bytes] | None = None,
) -> bytes:
    """The example bundle, its manifest passed through `change` (or replaced by `manifest`)."""
    files = example_files()
    document = copy.deepcopy(example_manifest())
    if change is not None:
        change(document)
    files["challenge.yaml"] = (
        manifest if manifest is not None else yaml.safe_dump(document, sort_keys=False).encode()
    )
    files.update(extra or {})
    return zip_bytes(files)


def grant_add_challenge(user: User) -> User:
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="benchmarks", codename="add_challenge")
    )
    return User.objects.get(pk=user.pk)  # a fresh object: permissions are cached per object
