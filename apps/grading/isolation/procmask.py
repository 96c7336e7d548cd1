"""Host-wide figures of `/proc` hidden from the sandbox.

The sandbox's `/proc` belongs to its own PID namespace, so it shows only its own processes; but
some files there describe the whole machine: the load average, pressure stall figures, CPU and
disk counters, interrupts, memory. Read in a loop while another grading runs, they tell what
that grading does and when (a timing channel). Inside the sandbox they are replaced, read-only:

- `loadavg`, `uptime`, `stat` and `meminfo` by fixed, well-formed contents (nothing measured:
  load 0, no CPU time, the sandbox's memory limit as its memory), so that programs and the C
  library that parse them (`os.getloadavg()`, memory probes) keep working;
- the other files by empty ones;
- the folders `pressure/` and `irq/` by empty read-only folders.

Files this kernel does not have are left alone (nothing to mask, and bubblewrap cannot create
a file in `/proc`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

from apps.grading.isolation.limits import Limits

PROC = "/proc"
# Files shown empty inside: host-wide counters that move with what other processes do. Files
# only root can read (`slabinfo`, `pagetypeinfo`, `timer_list`, ...) are unreadable inside
# already, and each mask costs about half a millisecond per grading: they are not listed.
EMPTY_FILES: tuple[str, ...] = (
    "diskstats",
    "interrupts",
    "softirqs",
    "vmstat",
    "zoneinfo",
    "buddyinfo",
    "schedstat",
    "sched_debug",
    "timer_stats",
    "latency_stats",
    "swaps",
    "sys/fs/file-nr",
    "sys/fs/inode-nr",
    "sys/fs/dentry-state",
)
# Folders shown empty inside.
EMPTY_FOLDERS: tuple[str, ...] = ("pressure", "irq")


def fixed_contents(limits: Limits, *, cpus: int) -> dict[str, str]:
    """The files shown with fixed contents inside, for a sandbox of `limits` on `cpus` CPUs.
    Nothing in them is measured."""
    kib = limits.memory_bytes // 1024
    idle = " 0" * 10
    stat = f"cpu {idle}\n" + "".join(f"cpu{n}{idle}\n" for n in range(max(1, cpus)))
    stat += "intr 0\nctxt 0\nbtime 0\nprocesses 0\nprocs_running 1\nprocs_blocked 0\nsoftirq 0\n"
    memory = {"MemTotal": kib, "MemFree": kib, "MemAvailable": kib, "Buffers": 0, "Cached": 0}
    memory |= {"SwapCached": 0, "Active": 0, "Inactive": 0, "SwapTotal": 0, "SwapFree": 0}
    memory |= {"Dirty": 0, "Shmem": 0}
    return {
        "loadavg": "0.00 0.00 0.00 1/1 1\n",
        "uptime": "0.00 0.00\n",
        "stat": stat,
        "meminfo": "".join(f"{name + ':':<16}{value:>8} kB\n" for name, value in memory.items()),
    }


# Where bubblewrap writes the masks' files for the compiled runner (`runner.c`), which binds
# them over /proc itself, in one mount each (bubblewrap's own binds re-read the whole mount
# table each time: about 0.1 ms a mask).
MASKS_DIR = "/run/masks"


@dataclass(frozen=True)
class ProcMask:
    """bubblewrap options (after `--proc /proc`, or with `by_runner` before the root is made
    read-only), the descriptors they name, and with `by_runner` the compiled runner's options
    (`--mask=NAME`, `--empty=NAME`)."""

    args: list[str]
    fds: list[int]
    runner_args: list[str]


def _exists(name: str) -> bool:
    return os.path.lexists(f"{PROC}/{name}")


@contextlib.contextmanager
def proc_mask(limits: Limits, *, by_runner: bool = False) -> Iterator[ProcMask]:
    """The options that mask host-wide `/proc` files in a new sandbox; the descriptors holding
    the replacement contents are closed on exit. bubblewrap binds them itself
    (`--ro-bind-data FD`, read-only tmpfs folders), or with `by_runner` writes them into
    `MASKS_DIR` of the read-only root for the compiled runner to bind."""
    cpus = len(os.sched_getaffinity(0))
    replacements = fixed_contents(limits, cpus=cpus)
    replacements |= dict.fromkeys(EMPTY_FILES, "")
    args: list[str] = []
    runner_args: list[str] = []
    fds: list[int] = []
    try:
        for name, text in replacements.items():
            if not _exists(name):
                continue
            fd = os.memfd_create("yoyaku-proc", os.MFD_CLOEXEC)
            fds.append(fd)
            if text:  # a new memfd is empty already
                os.write(fd, text.encode())
                os.lseek(fd, 0, os.SEEK_SET)
            if by_runner:
                flat = name.replace("/", "-")
                args += ["--perms", "0444", "--file", str(fd), f"{MASKS_DIR}/{flat}"]
                runner_args.append(f"--mask={name}")
            else:
                args += ["--ro-bind-data", str(fd), f"{PROC}/{name}"]
        folders = [name for name in EMPTY_FOLDERS if _exists(name)]
        if by_runner and folders:
            args += ["--dir", f"{MASKS_DIR}/empty"]
            runner_args += [f"--empty={name}" for name in folders]
        for name in [] if by_runner else folders:
            args += ["--size", "4096", "--tmpfs", f"{PROC}/{name}"]
            args += ["--remount-ro", f"{PROC}/{name}"]
        if by_runner and args:
            args = ["--dir", MASKS_DIR, *args]
        yield ProcMask(args, fds, runner_args)
    finally:
        for fd in fds:
            os.close(fd)
