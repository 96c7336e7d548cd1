"""A SHA-256 whose state can be saved and restored, so that a resumed upload goes on hashing
where the stored bytes end without reading them again.

Python's `hashlib` objects cannot be pickled or exported. OpenSSL's `SHA256_CTX` (the low-level
`SHA256_Init/Update/Final` API, deprecated in OpenSSL 3 but exported by every libcrypto 3.x) is
a plain C struct of fixed layout (`h[8]`, `Nl`, `Nh`, `data[16]`, `num`, `md_len`: 112 bytes),
so its bytes are the state. It runs at OpenSSL's speed, as hashlib does. The module checks
itself once against hashlib (a state saved mid-block, restored, finished) and refuses to work
when the library behaves otherwise.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
from functools import cache

STATE_SIZE = 112


@cache
def _libcrypto() -> ctypes.CDLL:
    name = ctypes.util.find_library("crypto") or "libcrypto.so.3"
    lib = ctypes.CDLL(name)
    lib.SHA256_Init.argtypes = [ctypes.c_char_p]
    lib.SHA256_Init.restype = ctypes.c_int
    lib.SHA256_Update.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.SHA256_Update.restype = ctypes.c_int
    lib.SHA256_Final.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    lib.SHA256_Final.restype = ctypes.c_int
    _self_check(lib)
    return lib


class ResumableSha256:
    """`update()` and `hexdigest()` like hashlib; `state()` gives bytes `from_state()` takes."""

    def __init__(self, state: bytes | None = None, *, _lib: ctypes.CDLL | None = None) -> None:
        self._lib = _lib or _libcrypto()
        self._ctx = ctypes.create_string_buffer(STATE_SIZE)
        if state is None:
            if self._lib.SHA256_Init(self._ctx) != 1:
                raise RuntimeError("SHA256_Init failed")
        else:
            if len(state) != STATE_SIZE:
                raise ValueError(f"A SHA-256 state has {STATE_SIZE} bytes, not {len(state)}.")
            ctypes.memmove(self._ctx, state, STATE_SIZE)

    @classmethod
    def from_state(cls, state: bytes) -> ResumableSha256:
        return cls(bytes(state))

    def update(self, data: bytes) -> None:
        if data and self._lib.SHA256_Update(self._ctx, data, len(data)) != 1:
            raise RuntimeError("SHA256_Update failed")

    def state(self) -> bytes:
        return self._ctx.raw

    def hexdigest(self) -> str:
        """The digest of everything so far; the object can go on being updated."""
        copy = ctypes.create_string_buffer(self._ctx.raw, STATE_SIZE)
        out = ctypes.create_string_buffer(32)
        if self._lib.SHA256_Final(out, copy) != 1:
            raise RuntimeError("SHA256_Final failed")
        return out.raw.hex()


def _self_check(lib: ctypes.CDLL) -> None:
    data = bytes(range(256)) * 5
    first = ResumableSha256(_lib=lib)
    first.update(data[:77])
    resumed = ResumableSha256(first.state(), _lib=lib)
    resumed.update(data[77:])
    if resumed.hexdigest() != hashlib.sha256(data).hexdigest():
        raise RuntimeError("libcrypto's SHA256_CTX does not have the expected layout.")


def empty_state() -> bytes:
    return ResumableSha256().state()
