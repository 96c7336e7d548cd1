"""Where the CLI keeps its settings and its upload state.

- `config.json` in the user's config directory (`click.get_app_dir("yoyaku")`: on Linux
  `$XDG_CONFIG_HOME/yoyaku`, by default `~/.config/yoyaku`; `YOYAKU_CONFIG_DIR` overrides),
  written by `yoyaku login` with mode 0600 in a 0700 directory: `{"url", "token"}`.
- `YOYAKU_URL` / `YOYAKU_TOKEN` override the file, each on its own.
- `uploads/<digest>.json` beside it: one small state file per upload (server, user,
  idempotency key → submission, files stored, job), so that `yoyaku submit` continues a
  killed upload.
- `uploads/resumable-<digest>.json` beside those: a resumable upload of one file's bytes
  (server, user, sha256, size → the upload's id), so a large file killed mid-upload carries
  on from the offset the server stored; removed once the upload is attached.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from yoyaku_client.record import Record

__all__ = [
    "ResumableState",
    "Settings",
    "UploadState",
    "config_dir",
    "load_settings",
    "save_settings",
]

DEFAULT_URL = "http://127.0.0.1:8000"
STATE_MAX_AGE = 30 * 24 * 3600


def config_dir() -> Path:
    override = os.environ.get("YOYAKU_CONFIG_DIR")
    if override:
        return Path(override)
    return Path(click.get_app_dir("yoyaku"))


def config_path() -> Path:
    return config_dir() / "config.json"


@dataclass(frozen=True, eq=False, repr=False)
class Settings(Record):
    """The server and token a command uses, and where each came from."""

    url: str
    token: str | None
    #: Where each value came from, for `yoyaku whoami`: "env", "file" or "default".
    url_source: str
    token_source: str


def _read_file() -> dict[str, Any]:
    path = config_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"cannot read {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def load_settings() -> Settings:
    data = _read_file()
    env_url, env_token = os.environ.get("YOYAKU_URL"), os.environ.get("YOYAKU_TOKEN")
    if env_url:
        url, url_source = env_url, "env"
    elif data.get("url"):
        url, url_source = str(data["url"]), "file"
    else:
        url, url_source = DEFAULT_URL, "default"
    if env_token:
        token, token_source = env_token, "env"
    elif data.get("token"):
        token, token_source = str(data["token"]), "file"
    else:
        token, token_source = None, "none"
    return Settings(url.rstrip("/"), token, url_source, token_source)


def _write_private(path: Path, text: str, *, durable: bool = True) -> None:
    """Write `text` to `path` atomically, readable by the owner only (0600). `durable` also
    flushes it to the disk before the rename (the settings; an upload's state file is only a
    cache of what the server knows, rewritten after every file, and skips that)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o600)  # whatever the umask said
            handle.write(text)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def save_settings(url: str, token: str) -> Path:
    path = config_path()
    _write_private(path, json.dumps({"url": url.rstrip("/"), "token": token}, indent=2) + "\n")
    with contextlib.suppress(OSError):
        os.chmod(path.parent, 0o700)
    return path


@dataclass
class UploadState:
    """What one `yoyaku submit` (server, user, key) has done so far."""

    server: str
    username: str
    key: str
    submission_id: str = ""
    reservation_id: str = ""
    job_id: str = ""
    files: dict[str, str] = field(default_factory=dict)
    updated_at: float = 0.0

    @staticmethod
    def path_for(server: str, username: str, key: str) -> Path:
        digest = hashlib.sha256(f"{server}\n{username}\n{key}".encode()).hexdigest()[:32]
        return config_dir() / "uploads" / f"{digest}.json"

    @property
    def path(self) -> Path:
        return self.path_for(self.server, self.username, self.key)

    @classmethod
    def load(cls, server: str, username: str, key: str) -> UploadState:
        path = cls.path_for(server, username, key)
        state = cls(server=server, username=username, key=key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return state
        if not isinstance(data, dict) or data.get("key") != key:
            return state
        state.submission_id = str(data.get("submission_id") or "")
        state.reservation_id = str(data.get("reservation_id") or "")
        state.job_id = str(data.get("job_id") or "")
        files = data.get("files")
        state.files = {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}
        state.updated_at = float(data.get("updated_at") or 0.0)
        return state

    def save(self) -> None:
        self.updated_at = time.time()
        data = {
            "server": self.server,
            "username": self.username,
            "key": self.key,
            "submission_id": self.submission_id,
            "reservation_id": self.reservation_id,
            "job_id": self.job_id,
            "files": self.files,
            "updated_at": self.updated_at,
        }
        _write_private(self.path, json.dumps(data, indent=2) + "\n", durable=False)
        _prune_old_states(self.path.parent)


@dataclass
class ResumableState:
    """The resumable upload holding one file's bytes (by server, user, sha256 and size)."""

    server: str
    username: str
    sha256: str
    size: int
    upload_id: str = ""

    @property
    def path(self) -> Path:
        raw = f"{self.server}\n{self.username}\n{self.sha256}\n{self.size}"
        digest = hashlib.sha256(raw.encode()).hexdigest()[:32]
        return config_dir() / "uploads" / f"resumable-{digest}.json"

    @classmethod
    def load(cls, server: str, username: str, sha256: str, size: int) -> ResumableState:
        state = cls(server=server, username=username, sha256=sha256, size=size)
        try:
            data = json.loads(state.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return state
        if isinstance(data, dict) and data.get("sha256") == sha256 and data.get("size") == size:
            state.upload_id = str(data.get("upload_id") or "")
        return state

    def save(self, upload_id: str) -> None:
        self.upload_id = upload_id
        data = {
            "server": self.server,
            "username": self.username,
            "sha256": self.sha256,
            "size": self.size,
            "upload_id": upload_id,
        }
        # Durable: a run killed right after the upload was made must find it again.
        _write_private(self.path, json.dumps(data, indent=2) + "\n")

    def forget(self) -> None:
        self.upload_id = ""
        with contextlib.suppress(OSError):
            self.path.unlink()


#: The folders pruned by this process: once is enough (a state file is saved after every
#: file of an upload, and the folder may hold a month of CI runs' files).
_PRUNED: set[Path] = set()


def _prune_old_states(folder: Path) -> None:
    """State files untouched for a month are of no use (drafts live 7 days, keys 24 h)."""
    if folder in _PRUNED:
        return
    _PRUNED.add(folder)
    cutoff = time.time() - STATE_MAX_AGE
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            with contextlib.suppress(OSError):
                if entry.suffix == ".json" and entry.stat().st_mtime < cutoff:
                    entry.unlink()
