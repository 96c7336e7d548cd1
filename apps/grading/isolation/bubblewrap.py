"""The bubblewrap command line of one grading.

Inside, the program sees:
- a read-only root holding `/usr` (and the merged-/usr links `/bin`, `/lib`, ...), the loader
  cache and the time zone from `/etc`, and the operator's `readonly_paths` — nothing else of the
  host: no `/home`, `/root`, `/var`, `/srv`, no project folder, no other grading's files;
- its own `/proc` (PID namespace: only its own processes), a minimal `/dev` (read-only, with a
  sized tmpfs at `/dev/shm`), no network at all (an empty network namespace), its own IPC, UTS
  and cgroup namespaces;
- `/sandbox`: one tmpfs of `scratch_bytes` holding `work/` (its working folder, a copy of the
  submission's files) and `tmp/` (`/tmp` is a link to it): the only writable places;
- the submission's files read-only at `/input`, copied into `work/` by the runner; or, for a
  stage that asks for it (a phase's run stage), `work/` is the submission's folder itself,
  read-only.
- a stage's own read-only folders at the paths it names (`/data`, `/reference`, ...), and its
  writable output folder (`/output`, `/scores`, ...) as a link to `/sandbox/output`, on the
  same tmpfs.

It runs as uid/gid 1000 inside a new user namespace with no capabilities, `no_new_privs`, no
further user namespaces (`--disable-userns`), in a new session, and dies with the worker
(`--die-with-parent`). Its PID 1 is the compiled runner (`runner.py`; with the shell runner,
bubblewrap's reaper): when it ends — the program exited and was reported, or the worker killed
it — the kernel kills every process left in the namespace.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from apps.grading.isolation.limits import MAX_METRICS_BYTES, PYTHON_FLAGS, Limits
from apps.grading.isolation.runner import INSIDE_PATH as RUNNER_INSIDE_PATH
from apps.grading.isolation.runner import runner_command

# Inside-the-sandbox layout.
INPUT_DIR = "/input"
SANDBOX_ROOT = "/sandbox"
WORK_DIR = "/sandbox/work"
TMP_DIR = "/sandbox/tmp"
OUTPUT_DIR = "/sandbox/output"
INSIDE_UID = 1000
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
# Host folders that hold the interpreter and the system libraries; on merged-/usr systems the
# ones at the root are links into /usr and are recreated as links.
_ROOT_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Public, harmless files that make the loader and the clock work as on the host.
_ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime")

# The shell runner, used where the compiled one (`runner.c`, which does the same and reports
# the same bytes) cannot be built: the sandbox's first process after bubblewrap's PID 1, run
# by /bin/sh, with the result file's path as its first argument (`metrics.json` of the working
# folder for a grading) and, second, the output folder to hand back ("" for none).
#   1. copy the submission's files into the working folder when they come as a read-only
#      folder at /input (many files; a few come as `--file` copies made by bubblewrap itself);
#   2. run the program with its stdout joined to stderr (the logs); the runner's own stdout is
#      the result channel, which the program does not inherit;
#   3. kill every other process of the sandbox (whatever the program forked, setsid or not),
#      so nothing can change the result file while it is read;
#   4. report: the exit status, then one letter for the result file (F regular file followed by
#      at most MAX_METRICS_BYTES + 1 bytes of it, L link, S special file, N none); with an
#      output folder to hand back, the letter ends with a line (F with the file's size) and
#      the folder follows as a tar stream, bounded by the tmpfs it lives on.
# A program can tamper with its own runner (same uid): that changes only its own result,
# which the worker validates like any metrics.json.
RUNNER = f"""
result=$1
export=$2
shift 2
if [ -d {INPUT_DIR} ]; then
  cp -R {INPUT_DIR}/. . || {{ echo "yoyaku: the files do not fit in the sandbox" >&2; exit 125; }}
fi
"$@" 1>&2
rc=$?
kill -9 -1 2>/dev/null
printf '%s\\n' "$rc"
if [ -n "$export" ]; then
  if [ -L "$result" ]; then printf 'L\\n'
  elif [ -f "$result" ]; then
    printf 'F%s\\n' "$(wc -c < "$result")"; head -c {MAX_METRICS_BYTES + 1} "$result"
  elif [ -e "$result" ]; then printf 'S\\n'
  else printf 'N\\n'
  fi
  exec tar -C "$export" -cf - . 2>/dev/null
fi
if [ -L "$result" ]; then printf L
elif [ -f "$result" ]; then printf F; exec head -c {MAX_METRICS_BYTES + 1} "$result"
elif [ -e "$result" ]; then printf S
else printf N
fi
"""


def bwrap_path() -> str | None:
    """The bubblewrap binary, looked up on a fixed system PATH (never the worker's)."""
    return shutil.which("bwrap", path=SANDBOX_PATH + ":/usr/sbin:/sbin")


def _root_filesystem() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for folder in _ROOT_DIRS:
        path = Path(folder)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), folder]
        elif path.is_dir():
            args += ["--ro-bind", folder, folder]
    for name in _ETC_FILES:
        # A link into /usr (the time zone, usually) is made again inside: the same file, one
        # mount fewer (about 0.1 ms each).
        target = os.path.realpath(name)
        if os.path.islink(name) and target.startswith("/usr/") and os.path.isfile(target):
            args += ["--symlink", target, name]
        else:
            args += ["--ro-bind-try", name, name]
    return args


@dataclass(frozen=True)
class InputFile:
    """A file bubblewrap copies into the working folder from an open descriptor."""

    fd: int
    path: str  # relative to the working folder
    executable: bool = False


def bwrap_argv(
    *,
    input_dir: Path,
    limits: Limits,
    readonly_paths: Sequence[str] = (),
    files: Sequence[InputFile] | None = None,
    folders: Sequence[str] = (),
    mounts: Mapping[str, str] | None = None,
    output: str = "",
    environment: Mapping[str, str] | None = None,
    readonly_work: bool = False,
    runner: str | None = None,
    staged: Sequence[str] = (),
) -> list[str]:
    """bubblewrap's options that run a new sandbox holding a copy of the submission's files
    (the command is `runner_argv`'s): with `files`, bubblewrap writes them (and `folders`)
    into the working folder itself; without, `input_dir` is mounted read-only at /input and
    the runner copies it.

    A stage may add host folders read-only at paths of its own (`mounts`: inside path → host
    folder, checked by `mounts.stage_folders_problem`), a writable `output` folder (a link into
    the sandbox's tmpfs, so it shares `scratch_bytes`) and variables to the environment (the
    fixed ones of `sandbox_env` win). With `readonly_work` the working folder is `input_dir`
    itself, mounted read-only (nothing is copied; `files` and `folders` are not used). With
    `runner` (the compiled runner's host path, see `runner.py`) it is bound read-only at
    `runner.INSIDE_PATH`; `staged` options (the files of its /proc masks) come before the
    root is made read-only."""
    args = [*_NAMESPACES, *_root_filesystem()]
    if runner is not None:
        # The compiled runner is the sandbox's PID 1 and reaps its orphans itself. It holds
        # CAP_SYS_ADMIN and CAP_SETPCAP (in the sandbox's user namespace) only to bind its
        # /proc masks, and gives up every capability and loads the seccomp filter before
        # anything else runs.
        args += ["--as-pid-1", "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]
        args += ["--ro-bind", runner, RUNNER_INSIDE_PATH]
    for path in readonly_paths:
        args += ["--ro-bind", path, path]
    for inside, host in (mounts or {}).items():
        args += ["--ro-bind", host, inside]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--size", str(limits.shm_bytes), "--tmpfs", "/dev/shm"]  # noqa: S108 - its own
    if files is None and not readonly_work:
        args += ["--ro-bind", str(input_dir), INPUT_DIR]
    args += _scratch(limits, output=output)
    if readonly_work:
        args += ["--ro-bind", str(input_dir), WORK_DIR]
        files, folders = (), ()
    for folder in folders:
        args += ["--dir", f"{WORK_DIR}/{folder}"]
    for file in files or ():
        args += ["--perms", "0755" if file.executable else "0644"]
        args += ["--file", str(file.fd), f"{WORK_DIR}/{file.path}"]
    args += [*staged, "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", WORK_DIR]
    args.append("--clearenv")
    for name, value in sandbox_env(home=WORK_DIR, tmp=TMP_DIR, extra=environment).items():
        args += ["--setenv", name, value]
    return args


_NAMESPACES = (
    "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
    "--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID), "--hostname", "sandbox",
)  # fmt: skip


def _scratch(limits: Limits, *, output: str) -> list[str]:
    """The one writable tmpfs: the working folder, /tmp (a link into it) and the stage's
    output folder (a link into it)."""
    args = ["--size", str(limits.scratch_bytes), "--tmpfs", SANDBOX_ROOT]
    args += ["--dir", WORK_DIR, "--dir", TMP_DIR]
    args += ["--symlink", TMP_DIR, "/tmp"]  # noqa: S108 - a link into the sandbox's own tmpfs
    if output:
        args += ["--dir", OUTPUT_DIR, "--symlink", OUTPUT_DIR, output]
    return args


PRLIMIT = "/usr/bin/prlimit"


def runner_argv(
    *,
    python: str,
    program: Sequence[str],
    limits: Limits,
    result: str = "metrics.json",
    export: str = "",
    compiled: bool = False,
    setup: Sequence[str] = (),
) -> list[str]:
    """The sandbox's command: the runner, which runs `python -E -s *program` (see
    `PYTHON_FLAGS`) in the working folder under the rlimits, set hard and soft (so they can
    only be lowered) in the process that executes the interpreter, then reports the `result`
    file (relative to the working folder, or absolute inside the sandbox) and, when `export`
    names the output folder, that folder's files. `compiled`: the compiled runner bound by
    `bwrap_argv(runner=...)` (see `runner.py`), given its `setup` options first (the filter and
    the masks, `surface.sandbox_surface(by_runner=True)`); else the shell runner, with
    util-linux's `prlimit` setting the rlimits.

    RLIMIT_NPROC counts the tasks of the sandbox's uid in its own user namespace: the budget
    is the sandbox's alone, whatever else the worker's uid runs on the host."""
    rlimits = [
        f"--cpu={max(1, limits.cpu_seconds)}",
        f"--as={limits.memory_bytes}",
        f"--fsize={limits.file_bytes}",
        f"--nproc={limits.processes}",
        f"--nofile={limits.open_files}",
        "--core=0",
    ]
    if compiled:
        return runner_command(
            result=result,
            export=export,
            rlimits=[*setup, *rlimits],
            program=[python, *PYTHON_FLAGS, *program],
        )
    return [
        "/bin/sh", "-c", RUNNER, "runner", result, export,
        PRLIMIT, *rlimits, "--", python, *PYTHON_FLAGS, *program,
    ]  # fmt: skip


def sandbox_env(*, home: str, tmp: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The program's whole environment: fixed values, nothing taken from the worker's, and a
    stage's `extra` variables (which cannot replace a fixed one)."""
    return {
        **(extra or {}),
        "PATH": SANDBOX_PATH,
        "LANG": "C.UTF-8",
        "HOME": home,
        "TMPDIR": tmp,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
    }
