"""Teams of a challenge (SPEC §11.4). A participant who submits without a team gets a team of
one named after them; the leaderboard has one row per team. Joining, leaving, sizes and locks
are the teams service's; the rules a database can hold are constraints here."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models

from apps.benchmarks.models.challenges import Challenge
from apps.core.models_utils import new_hex_id
from apps.submissions.models import filename_fold


def new_invite_code() -> str:
    return secrets.token_urlsafe(12)


class Team(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=new_hex_id, editable=False)
    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="teams")
    name = models.CharField(max_length=100)
    # `filename_fold(name)`: names are unique per challenge, compared case-insensitively.
    name_folded = models.CharField(max_length=400, editable=False)
    invite_code = models.CharField(max_length=32, unique=True, default=new_invite_code)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["challenge", "created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["challenge", "name_folded"], name="benchmarks_team_name_unique"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: object, **kwargs: object) -> None:
        self.name_folded = filename_fold(self.name)
        super().save(*args, **kwargs)  # type: ignore[arg-type]


class TeamMember(models.Model):
    """A user in a team; `challenge` repeats the team's so that the database holds "at most
    one team per user per challenge"."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="members")
    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="team_memberships"
    )
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team", "joined_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["challenge", "user"], name="benchmarks_one_team_per_challenge"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.team_id}"
