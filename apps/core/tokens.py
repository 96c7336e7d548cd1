"""The API token scheme: what a token looks like and what is stored of it.

A token is `yk_<key id>_<secret>`: a 12-hex-digit key id (not secret; the indexed lookup) and
256 random bits (`secrets.token_urlsafe(32)`). The database keeps the key id and the SHA-256
of the whole token, never the token: a database backup, the admin and every log hold nothing
that authenticates. A slow password hash buys nothing for 256 random bits, and an HMAC keyed
with `SECRET_KEY` would end every token when the key rotates, so a plain SHA-256 it is; the
stored and the presented digests are compared with `hmac.compare_digest`.

A token minted before this scheme (a 40-hex-digit key) has no key id of its own: its lookup
id is derived from its digest (`x` + the digest's first 15 hex digits), so it is found by the
same one indexed query.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

PREFIX = "yk"
_FORMAT = re.compile(r"^yk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
#: Longest token string looked up at all (a new token is 59 characters, an old one 40).
MAX_TOKEN_LENGTH = 200


@dataclass(frozen=True)
class TokenParts:
    key_id: str
    digest: str


@dataclass(frozen=True)
class NewToken:
    token: str
    parts: TokenParts


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_parts(token: str) -> TokenParts | None:
    """The lookup id and digest of a presented token; None for a string no token can be."""
    if not token or len(token) > MAX_TOKEN_LENGTH or not token.isascii() or not token.isprintable():
        return None
    digest = token_digest(token)
    match = _FORMAT.match(token)
    key_id = match.group(1) if match else "x" + digest[:15]
    return TokenParts(key_id=key_id, digest=digest)


def token_generate() -> NewToken:
    """A fresh token (shown once) and what is stored of it."""
    token = f"{PREFIX}_{secrets.token_hex(6)}_{secrets.token_urlsafe(32)}"
    parts = token_parts(token)
    assert parts is not None  # noqa: S101 - the format above always parses
    return NewToken(token=token, parts=parts)


def digests_match(stored: str, presented: str) -> bool:
    return hmac.compare_digest(stored.encode("ascii"), presented.encode("ascii"))
