"""Helpers for the grading-isolation tests: what runs on the host, seen from the host."""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def _status(pid: str) -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def live_pids() -> list[str]:
    return [
        entry
        for entry in os.listdir("/proc")
        if entry.isdigit() and not _status(entry).get("State", "Z").startswith(("Z", "X"))
    ]


def sleep_argument(seconds: int) -> str:
    """A `sleep` duration of about `seconds` that no other process on the host holds in its
    command line: the tests find their program by it, and another test run on the same
    machine (CI beside a developer's `make test`) runs the same programs."""
    return f"{seconds}.{uuid.uuid4().int % 10**9:09d}"


def processes_with_argument(argument: str) -> list[int]:
    """Live host processes whose command line holds `argument`."""
    found = []
    for pid in live_pids():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argument.encode() in argv:
            found.append(int(pid))
    return found


def descendants(root: int) -> list[int]:
    """Live host processes below `root` (children, grandchildren, ...)."""
    parents = {int(pid): int(_status(pid).get("PPid", "0")) for pid in live_pids()}
    found: list[int] = []
    frontier = {root}
    while frontier:
        children = {pid for pid, parent in parents.items() if parent in frontier}
        children -= set(found)
        found.extend(children)
        frontier = children
    return found


def real_effective_saved_uids(pid: int) -> tuple[int, int, int] | None:
    uids = _status(str(pid)).get("Uid")
    if uids is None:
        return None
    real, effective, saved, _ = (int(part) for part in uids.split())
    return real, effective, saved


def pid_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def sandbox_processes(root: int) -> list[int]:
    """Live host processes below `root` that belong to a sandbox: bubblewrap itself (or the
    setpriv or compiled runner starting it) and everything in another PID namespace. Other
    children of the test process (a browser, a live server) are not counted."""
    own = pid_namespace(root)
    found = []
    for pid in descendants(root):
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        except OSError:
            exe = ""
        starter = exe in ("bwrap", "setpriv") or exe.startswith("runner-")
        if starter or pid_namespace(pid) not in (own, None):
            found.append(pid)
    return found
