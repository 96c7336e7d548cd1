"""`yoyaku submit` without the terminal: collect, check, hash, resume, upload, enqueue.

The order of a submission (an optional quota reservation, then one file per request):

1. collect the files (a folder is walked) and refuse, before any request, what the server
   would refuse (name, extension, size, duplicates, count, entrypoint and config present);
2. hash them (in parallel) and derive the idempotency key, unless one is given:
   `yoyaku-` + sha256 over the user, the files' names and hashes and the configuration;
3. look for the submission of that key: the local state file first, then the server's list
   (a submission's metadata carries the key as `yoyaku_upload_key`); a sealed one means the
   job exists, and it is replayed instead of made again;
4. with `reserve`, hold a quota slot, extended in the background while the upload runs;
5. create the draft with the first file (or continue the one found), then send the other
   files one per request with `X-Content-SHA256`, `parallel` (2) at a time, skipping those the
   server already stores with the same hash; the state file follows every step;
6. create the job with the key (and the reservation); any failure releases the reservation.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from yoyaku_client.submit.hashing import HashQueue, default_idempotency_key, hash_files
    from yoyaku_client.submit.options import FileOutcome, SubmitOptions, SubmitResult
    from yoyaku_client.submit.packing import (
        LocalFile,
        LocalRefusal,
        allowed_extensions,
        check_files,
        collect_files,
        name_problem,
    )
    from yoyaku_client.submit.reporting import Reporter
    from yoyaku_client.submit.resume import RETRY_STATUSES, retry_key
    from yoyaku_client.submit.submitter import Submitter

__all__ = [
    "RETRY_STATUSES",
    "FileOutcome",
    "HashQueue",
    "LocalFile",
    "LocalRefusal",
    "Reporter",
    "SubmitOptions",
    "SubmitResult",
    "Submitter",
    "allowed_extensions",
    "check_files",
    "collect_files",
    "default_idempotency_key",
    "hash_files",
    "name_problem",
    "retry_key",
]

# Each name's module, imported on its first use: the reporters' base (`Reporter`) and the
# files' checks load without the steps that send (`Submitter`, the client).
_HOMES = {
    "RETRY_STATUSES": "resume",
    "FileOutcome": "options",
    "HashQueue": "hashing",
    "LocalFile": "packing",
    "LocalRefusal": "packing",
    "Reporter": "reporting",
    "SubmitOptions": "options",
    "SubmitResult": "options",
    "Submitter": "submitter",
    "allowed_extensions": "packing",
    "check_files": "packing",
    "collect_files": "packing",
    "default_idempotency_key": "hashing",
    "hash_files": "hashing",
    "name_problem": "packing",
    "retry_key": "resume",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
