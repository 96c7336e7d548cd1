"""What the challenge pages read (SPEC §11.7): the list with its search and status, a challenge
as a participant sees it (phases, the team's limits, leaderboard tabs, the team, the team's
submissions with their run logs) and the hosts' console. Participant reads never include the
scorer's logs, the reference data or a hidden split's scores before its reveal: they go through
`phase_mine` and `board_open`, which enforce that, and the run logs are the jobs' (stage 1's)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from django.db.models import Q

from apps.benchmarks.board_selectors import Board, board_access, board_open, board_page
from apps.benchmarks.exceptions import LeaderboardLoginRequired, NotRevealed
from apps.benchmarks.models import (
    Challenge,
    Entry,
    Metric,
    Participant,
    Phase,
    Split,
    Team,
    TeamGrant,
    TeamMember,
)
from apps.benchmarks.selectors import AnyUser, challenge_list, challenge_may_manage
from apps.benchmarks.services.phase_limits import LimitUse
from apps.benchmarks.services.reveal import reveal_moment
from apps.benchmarks.team_selectors import PhaseMine, TeamEntry, phase_mine
from apps.jobs.models import Job

UPCOMING = "upcoming"
OPEN = "open"
CLOSED = "closed"
STATUSES = (UPCOMING, OPEN, CLOSED)
#: Rows of a leaderboard tab on the page (the API pages through the rest).
PAGE_BOARD_ROWS = 100


def phase_status(phase: Phase, now: dt.datetime) -> str:
    """upcoming before `start`, closed from `end` on, open in between."""
    if now < phase.start:
        return UPCOMING
    if phase.end is not None and now >= phase.end:
        return CLOSED
    return OPEN


def challenge_status(phases: list[Phase], now: dt.datetime) -> str:
    """open while any phase is open; else upcoming while a phase is still to start; else
    closed (a challenge without phases is upcoming)."""
    statuses = {phase_status(phase, now) for phase in phases}
    if OPEN in statuses:
        return OPEN
    if UPCOMING in statuses or not statuses:
        return UPCOMING
    return CLOSED


@dataclass(frozen=True)
class ChallengeCard:
    challenge: Challenge
    status: str
    start: dt.datetime | None
    end: dt.datetime | None


def challenge_cards(
    *, user: AnyUser, query: str, status: str, now: dt.datetime
) -> list[ChallengeCard]:
    """The challenges the caller may list whose slug or title contains `query` (any case),
    with their status; only those of `status` when it is one of STATUSES."""
    challenges = challenge_list(user=user)
    if query:
        challenges = challenges.filter(Q(slug__icontains=query) | Q(title__icontains=query))
    cards = []
    for challenge in challenges:
        phases = list(challenge.phases.all())
        ends = [phase.end for phase in phases]
        card = ChallengeCard(
            challenge=challenge,
            status=challenge_status(phases, now),
            start=min((phase.start for phase in phases), default=None),
            end=None if not ends or None in ends else max(e for e in ends if e is not None),
        )
        if status not in STATUSES or card.status == status:
            cards.append(card)
    return cards


@dataclass
class BoardTab:
    """One split of a phase's leaderboard: its rows, or why they are not shown."""

    split: Split
    board: Board | None = None
    #: When a hidden split becomes visible (None: when a host reveals it).
    reveal_at: dt.datetime | None = None
    withheld: str = ""  # "", "not_revealed" or "login_required"


def board_tab(*, phase: Phase, split: Split, user: AnyUser) -> BoardTab:
    """The first rows of `split`'s leaderboard as the caller may read them (through the same
    access rules as the leaderboard API)."""
    tab = BoardTab(split=split, reveal_at=reveal_moment(phase))
    try:
        access = board_access(slug=phase.challenge.slug, phase_slug=phase.slug, user=user)
        board = board_open(access=access, split=split.name, scoring_version=None)
        tab.board = board_page(board=board, phase=access.phase, limit=PAGE_BOARD_ROWS, offset=0)
    except NotRevealed:
        tab.withheld = "not_revealed"
    except LeaderboardLoginRequired:
        tab.withheld = "login_required"
    return tab


@dataclass
class PhaseView:
    phase: Phase
    status: str
    metrics: list[Metric]
    tabs: list[BoardTab]
    reveal_at: dt.datetime | None
    #: The caller's team's limits and submissions (None: no team yet, or not signed in).
    mine: PhaseMine | None = None
    logs: dict[str, str] = field(default_factory=dict)

    @property
    def limits(self) -> list[tuple[str, LimitUse]]:
        return list(self.mine.limits.items()) if self.mine else []

    @property
    def submissions(self) -> list[TeamEntry]:
        return self.mine.submissions if self.mine else []


def run_logs(submission_ids: list[str]) -> dict[str, str]:
    """Each submission's latest job's logs: the run stage's output only (what the participant
    reads; the scorer's go to `Entry.scoring_logs`, never here)."""
    logs: dict[str, str] = {}
    jobs = Job.objects.filter(submission_id__in=submission_ids).order_by(
        "submission_id", "-created_at", "-id"
    )
    for submission_id, text in jobs.values_list("submission_id", "logs"):
        logs.setdefault(submission_id, text)
    return logs


def phase_view(
    *, phase: Phase, user: AnyUser, in_team: bool, now: dt.datetime, boards: bool = True
) -> PhaseView:
    """The phase as its section shows it: its leaderboard tabs (unless `boards` is off) and,
    for a member of a team (`in_team`), the team's limits and submissions with their logs."""
    splits = phase.splits.all() if boards else []
    view = PhaseView(
        phase=phase,
        status=phase_status(phase, now),
        metrics=list(phase.metrics.all()),
        tabs=[board_tab(phase=phase, split=split, user=user) for split in splits],
        reveal_at=reveal_moment(phase),
    )
    if in_team and user.is_authenticated:
        view.mine = phase_mine(user=user, slug=phase.challenge.slug, phase_slug=phase.slug)
        view.logs = run_logs([item.entry.pk for item in view.mine.submissions])
    return view


@dataclass
class ChallengePage:
    challenge: Challenge
    status: str
    manage: bool
    participant: Participant | None
    members: list[TeamMember]
    phases: list[PhaseView]

    @property
    def team(self) -> object | None:
        return self.members[0].team if self.members else None


def _team_members(challenge: Challenge, user: AnyUser) -> list[TeamMember]:
    if not user.is_authenticated:
        return []
    mine = TeamMember.objects.filter(challenge=challenge, user_id=user.pk).first()
    if mine is None:
        return []
    return list(
        TeamMember.objects.filter(team_id=mine.team_id)
        .select_related("team", "user")
        .order_by("pk")
    )


def challenge_page(*, challenge: Challenge, user: AnyUser, now: dt.datetime) -> ChallengePage:
    """`challenge` (one the caller may see: `challenge_get_visible`) as its page shows it."""
    members = _team_members(challenge, user)
    participant = (
        Participant.objects.filter(challenge=challenge, user_id=user.pk).first()
        if user.is_authenticated
        else None
    )
    phases = list(challenge.phases.all())
    for phase in phases:
        phase.challenge = challenge  # spares a query per phase
    return ChallengePage(
        challenge=challenge,
        status=challenge_status(phases, now),
        manage=challenge_may_manage(challenge=challenge, user=user),
        participant=participant,
        members=members,
        phases=[
            phase_view(phase=phase, user=user, in_team=bool(members), now=now) for phase in phases
        ],
    )


def challenge_phase(*, challenge: Challenge, phase_slug: str) -> Phase | None:
    for phase in challenge.phases.all():
        if phase.slug == phase_slug:
            phase.challenge = challenge
            return phase
    return None


def challenge_grants(*, challenge: Challenge) -> list[TeamGrant]:
    """Every grant of extra submissions in the challenge, newest first (hosts' console)."""
    return list(
        TeamGrant.objects.filter(team__challenge=challenge)
        .select_related("team", "phase", "granted_by")
        .order_by("-created_at", "-id")
    )


def challenge_refunds(*, challenge: Challenge) -> list[Entry]:
    """Every refunded submission of the challenge, newest first (hosts' console)."""
    return list(
        Entry.objects.filter(phase__challenge=challenge)
        .exclude(refund_reason="")
        .select_related("team", "user", "phase", "submission")
        .order_by("-created_at", "-submission_id")
    )


def challenge_teams(*, challenge: Challenge) -> list[Team]:
    """The challenge's teams by name (the console's grant form)."""
    return list(Team.objects.filter(challenge=challenge).order_by("name_folded", "id"))
