from django.urls import URLPattern, URLResolver, path

from apps.benchmarks.api.board_views import (
    PhaseLeaderboardApi,
    PhaseSubmissionsApi,
    SubmissionFinalApi,
)
from apps.benchmarks.api.rescore import (
    PhaseRescoreApi,
    PhaseRescoreCancelApi,
    PhaseRescoreRetryApi,
)
from apps.benchmarks.api.reveal import PhaseRevealApi
from apps.benchmarks.api.teams import (
    PhaseMineApi,
    TeamCreateApi,
    TeamGrantsApi,
    TeamJoinApi,
    TeamLeaveApi,
    TeamMineApi,
)
from apps.benchmarks.api.views import (
    ChallengeDetailApi,
    ChallengeListApi,
    ChallengeParticipateApi,
    ParticipantApproveApi,
    PhasePublicDataApi,
)

urlpatterns: list[URLPattern | URLResolver] = [
    path("challenges/", ChallengeListApi.as_view(), name="challenge-list"),
    path("challenges/<slug:slug>/", ChallengeDetailApi.as_view(), name="challenge-detail"),
    path(
        "challenges/<slug:slug>/phases/<slug:phase>/public-data/",
        PhasePublicDataApi.as_view(),
        name="challenge-phase-public-data",
    ),
    path(
        "challenges/<slug:slug>/participate/",
        ChallengeParticipateApi.as_view(),
        name="challenge-participate",
    ),
    path(
        "challenges/<slug:slug>/participants/<int:user_id>/approve/",
        ParticipantApproveApi.as_view(),
        name="challenge-participant-approve",
    ),
    path(
        "challenges/<slug:slug>/phases/<slug:phase>/leaderboard/",
        PhaseLeaderboardApi.as_view(),
        name="challenge-phase-leaderboard",
    ),
    path(
        "challenges/<slug:slug>/phases/<slug:phase>/submissions/",
        PhaseSubmissionsApi.as_view(),
        name="challenge-phase-submissions",
    ),
    path(
        "submissions/<hexid:submission_id>/final/",
        SubmissionFinalApi.as_view(),
        name="submission-final",
    ),
    path(
        "challenges/<slug:slug>/phases/<slug:phase>/reveal/",
        PhaseRevealApi.as_view(),
        name="challenge-phase-reveal",
    ),
]

# Teams, grants and a team's view of a phase (SPEC §11.4).
urlpatterns += [
    path("challenges/<slug:slug>/teams/", TeamCreateApi.as_view(), name="challenge-teams"),
    path("challenges/<slug:slug>/teams/join/", TeamJoinApi.as_view(), name="challenge-team-join"),
    path("challenges/<slug:slug>/teams/mine/", TeamMineApi.as_view(), name="challenge-team-mine"),
    path(
        "challenges/<slug:slug>/teams/<hexid:team_id>/leave/",
        TeamLeaveApi.as_view(),
        name="challenge-team-leave",
    ),
    path(
        "challenges/<slug:slug>/teams/<hexid:team_id>/grants/",
        TeamGrantsApi.as_view(),
        name="challenge-team-grants",
    ),
    path(
        "challenges/<slug:slug>/phases/<slug:phase>/me/",
        PhaseMineApi.as_view(),
        name="challenge-phase-me",
    ),
]

# Rescoring in a new scoring version (SPEC §11.6).
urlpatterns += [
    path(
        "challenges/<slug:slug>/phases/<slug:phase>/rescore/",
        PhaseRescoreApi.as_view(),
        name="challenge-phase-rescore",
    ),
    path(
        "challenges/<slug:slug>/phases/<slug:phase>/rescore/retry/",
        PhaseRescoreRetryApi.as_view(),
        name="challenge-phase-rescore-retry",
    ),
    path(
        "challenges/<slug:slug>/phases/<slug:phase>/rescore/cancel/",
        PhaseRescoreCancelApi.as_view(),
        name="challenge-phase-rescore-cancel",
    ),
]
