"""The benchmarks app's tables: challenges as bundles describe them (`challenges`), teams
(`teams`), hosts' grants of extra submissions (`grants`), phase submissions and their scores
(`scores`), rescores in a new scoring version (`rescores`)."""

from apps.benchmarks.models.challenges import (
    Baseline,
    Challenge,
    ChallengeHost,
    Direction,
    Metric,
    Participant,
    ParticipantStatus,
    Participation,
    Phase,
    PhaseKind,
    Reveal,
    ScoringVersion,
    Split,
    Visibility,
)
from apps.benchmarks.models.grants import GrantLimit, TeamGrant
from apps.benchmarks.models.rescores import Rescore, RescoreItem, RescoreItemStatus, RescoreState
from apps.benchmarks.models.scores import Entry, Score, TeamBest
from apps.benchmarks.models.teams import Team, TeamMember

__all__ = [
    "Baseline",
    "Challenge",
    "ChallengeHost",
    "Direction",
    "Entry",
    "GrantLimit",
    "Metric",
    "Participant",
    "ParticipantStatus",
    "Participation",
    "Phase",
    "PhaseKind",
    "Rescore",
    "RescoreItem",
    "RescoreItemStatus",
    "RescoreState",
    "Reveal",
    "Score",
    "ScoringVersion",
    "Split",
    "Team",
    "TeamBest",
    "TeamGrant",
    "TeamMember",
    "Visibility",
]
