"""The session engine: Django's database sessions, refusing a key Django could not have made.

A cookie value may be quoted with octal escapes (`sessionid="abcdefgh\\000ijkl"`), which Django
unquotes into a NUL; gunicorn lets it through (it is plain ASCII on the wire) and PostgreSQL
refused the lookup (`DataError`, a 500 on every request, signed in or not). Django makes keys of
lowercase letters and digits, so any other key is no session: the request is anonymous.
"""

from __future__ import annotations

from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore


class SessionStore(DatabaseSessionStore):
    def _validate_session_key(self, key: str | None) -> bool:
        # Django's rule (at least 8 characters), and only the characters it makes keys of.
        return bool(key) and len(key or "") >= 8 and bool(key and key.isascii() and key.isalnum())
