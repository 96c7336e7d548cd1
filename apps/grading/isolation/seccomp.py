"""The sandbox's seccomp filter: the kernel interfaces a graded program never needs, refused.

bubblewrap loads the filter (`--seccomp FD`, a BPF program) into the sandbox's first process
just before it executes the runner; every process of the sandbox inherits it and none can
remove it (`no_new_privs` is set, and a filter can only be added to, never lifted).

The filter allows by default and refuses, with EPERM, the system calls below: kernel attack
surface a Python program has no use for (io_uring, the key store, BPF, userfaultfd, perf
events), the ones that look at or change other processes (ptrace and friends), and the ones
that build or leave a sandbox (mounts, namespaces, `pivot_root`, module loading, kexec,
reboot, swap, quotas, clock setting). `clone` is refused only when it asks for a new namespace;
`clone3`, whose flags sit in memory a filter cannot read, answers ENOSYS so that the C library
falls back to `clone`. `personality` may only be queried: setting it could turn off address
randomisation or make data executable for what the program runs next.

Only the machine's native system call convention is let through: a call made through another
one (the 32-bit `int 0x80` or x32 calls on x86_64) kills the process. Each rule would otherwise
have to be written again for every convention, and no graded program uses them.

The filter is built with libseccomp (the system's libseccomp2) through its Python binding:
`pyseccomp` from PyPI in the project's virtualenv, or the same API from Debian's
`python3-seccomp` when the isolation package runs under the system interpreter. Without
either, `seccomp_problem()` says why, and the isolation probe reports that this host cannot
sandbox (see `probe.isolation_probe`).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import importlib
import os
from collections.abc import Iterator
from typing import Any

# Refused with EPERM whatever their arguments. Names the installed libseccomp does not know
# on this machine's architecture are skipped (a kernel older than the name cannot be asked
# for it either).
REFUSED_SYSCALLS: tuple[str, ...] = (
    # Kernel attack surface a graded program has no use for.
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "userfaultfd",
    "perf_event_open",
    "lookup_dcookie",
    "fanotify_init",
    "syslog",
    # Other processes.
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "move_pages",
    "migrate_pages",
    # Building or leaving a sandbox: mounts, namespaces, roots, handles.
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "open_tree",
    "mount_setattr",
    "unshare",
    "setns",
    "open_by_handle_at",
    "name_to_handle_at",
    # The machine itself.
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
    "nfsservctl",
    "uselib",
    "ustat",
    "sysfs",
    "_sysctl",
    "iopl",
    "ioperm",
    "vm86",
    "vm86old",
    "settimeofday",
    "clock_settime",
    "stime",
    "vhangup",
)

# `clone` flags that create a namespace (CLONE_NEWTIME shares its bit with the exit signal in
# `clone` and exists only for `clone3` and `unshare`, both refused).
CLONE_NAMESPACE_FLAGS: dict[str, int] = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
# `personality(0xffffffff)` reads the persona without changing it.
PERSONALITY_QUERY = 0xFFFFFFFF
# The refusal every refused call gets, and `clone3`'s.
REFUSAL = errno.EPERM
CLONE3_REFUSAL = errno.ENOSYS

# Python bindings of libseccomp with one API: the project's (PyPI), then Debian's.
_BINDINGS = ("pyseccomp", "seccomp")


class SeccompUnavailable(Exception):
    """The filter cannot be built on this host; the message says why."""


def _binding() -> Any:
    reasons = []
    for name in _BINDINGS:
        try:
            return importlib.import_module(name)
        except ImportError as error:
            reasons.append(f"{name}: {error}")
        except (RuntimeError, OSError) as error:  # pyseccomp: libseccomp itself is missing
            reasons.append(f"{name}: {error}")
    raise SeccompUnavailable(
        "The seccomp filter cannot be built: no libseccomp binding could be loaded "
        f"({'; '.join(reasons)}); install libseccomp2 and the requirements (pyseccomp)."
    )


def _build(seccomp: Any) -> Any:
    filter_ = seccomp.SyscallFilter(seccomp.ALLOW)
    # Anything but the native convention (x86 32-bit `int 0x80`, x32) kills the process.
    filter_.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)
    refuse = seccomp.ERRNO(REFUSAL)
    for name in REFUSED_SYSCALLS:
        if seccomp.resolve_syscall(seccomp.Arch.NATIVE, name) >= 0:
            filter_.add_rule(refuse, name)
    # clone's flags are its first argument on x86_64 and aarch64 (the architectures bubblewrap
    # gradings run on); one rule per flag, so any namespace flag is refused.
    for flag in CLONE_NAMESPACE_FLAGS.values():
        filter_.add_rule(refuse, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    if seccomp.resolve_syscall(seccomp.Arch.NATIVE, "clone3") >= 0:
        filter_.add_rule(seccomp.ERRNO(CLONE3_REFUSAL), "clone3")
    # Only the query passes. The kernel reads the persona's low 32 bits, whatever the upper
    # ones hold, and a rule compares one argument once: a call is refused when any of those
    # 32 bits is clear (one rule per bit), so no upper-bit spelling slips a persona through.
    for bit in range(PERSONALITY_QUERY.bit_length()):
        filter_.add_rule(refuse, "personality", seccomp.Arg(0, seccomp.MASKED_EQ, 1 << bit, 0))
    return filter_


@functools.lru_cache(maxsize=1)
def seccomp_program() -> bytes:
    """The filter as the BPF program bubblewrap loads (built once per process, about 1 ms).
    Raises `SeccompUnavailable` when libseccomp or its binding is missing or refuses."""
    seccomp = _binding()
    try:
        filter_ = _build(seccomp)
        fd = os.memfd_create("yoyaku-seccomp", os.MFD_CLOEXEC)
        with os.fdopen(fd, "w+b") as exported:
            filter_.export_bpf(exported)
            exported.seek(0)
            program = exported.read()
    except (OSError, ValueError, RuntimeError) as error:
        raise SeccompUnavailable(f"The seccomp filter cannot be built: {error}") from error
    if not program or len(program) % 8:
        raise SeccompUnavailable("The seccomp filter cannot be built: libseccomp exported none")
    return program


def syscall_number(name: str) -> int | None:
    """`name`'s number in this machine's native convention, or None where it has none.
    Raises `SeccompUnavailable`."""
    seccomp = _binding()
    number = int(seccomp.resolve_syscall(seccomp.Arch.NATIVE, name))
    return number if number >= 0 else None


def seccomp_problem() -> str | None:
    """Why this host cannot build the sandbox's filter, or None."""
    try:
        seccomp_program()
    except SeccompUnavailable as error:
        return str(error)
    return None


@contextlib.contextmanager
def seccomp_fd() -> Iterator[int]:
    """An open descriptor holding the filter, for `bwrap --seccomp FD` (closed on exit).
    Raises `SeccompUnavailable`."""
    program = seccomp_program()
    fd = os.memfd_create("yoyaku-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
        yield fd
    finally:
        os.close(fd)
