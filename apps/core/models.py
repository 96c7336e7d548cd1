"""Models shared by the whole platform."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from apps.core.models_utils import new_hex_id


class Heartbeat(models.Model):
    """The last sign of life of a named background process (e.g. a plan watcher).

    `beats` counts every tick; it is written by a locked read-modify-write, so concurrent
    tickers never lose one (the same discipline every service uses).
    """

    name = models.CharField(max_length=100, unique=True)
    last_tick = models.DateTimeField()
    beats = models.PositiveBigIntegerField(default=0)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} @ {self.last_tick.isoformat()}"


class ApiToken(models.Model):
    """A named API credential of one user, stored only as a digest (`apps.core.tokens`).

    `key_id` is the token's non-secret lookup part (what an index finds); `digest` is the
    SHA-256 of the whole token, compared in constant time. The token itself is shown once, at
    creation, and kept nowhere. `scopes` (space-separated, `apps.core.scopes`) limit what the
    token may do; `last_used_at` is written at most once a minute (`token_authenticate`).
    Revoking deletes the row, so the next request with the token is a 401.
    """

    id = models.CharField(primary_key=True, max_length=32, default=new_hex_id, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    key_id = models.CharField(max_length=16, unique=True, editable=False)
    digest = models.CharField(max_length=64, editable=False)
    scopes = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = "API token"
        constraints = [
            models.UniqueConstraint(fields=["user", "name"], name="core_apitoken_unique_name"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.user_id})"

    @property
    def scope_list(self) -> list[str]:
        return self.scopes.split()

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes.split()
