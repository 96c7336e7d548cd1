"""API token helpers shared by the commands (no I/O)."""

from __future__ import annotations

import datetime as dt
import socket

#: The scopes a token may carry (the server refuses those your account cannot hold).
TOKEN_SCOPES = ("read", "submit", "review", "host", "admin")


def token_name_default() -> str:
    """A name for a token made by `yoyaku login`: unique enough to log in again from the same
    machine (names are unique per user)."""
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return f"yoyaku login {socket.gethostname()[:40]} {now}"
