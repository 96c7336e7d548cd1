"""Small building blocks shared by the apps' models."""

from __future__ import annotations

import uuid


def new_hex_id() -> str:
    """A 32-char lowercase hex id (uuid4), the id format of every public object."""
    return uuid.uuid4().hex
