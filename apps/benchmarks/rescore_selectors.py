"""What the hosts' console shows of a phase's rescore (SPEC §11.6): the version the
leaderboard serves, the newest rescore's version and state, its done/failed/total, and each
failed item with its reason. Hosts only: the caller checks `challenge_may_manage` first."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, Q

from apps.benchmarks.models import Phase, Rescore, RescoreItem, RescoreItemStatus, RescoreState

#: Failed items listed on the console (the count says how many there are in all).
FAILED_SHOWN = 50


@dataclass(frozen=True)
class FailedItem:
    #: The submission's id, or "" for a baseline.
    submission_id: str
    #: The team's name, or the baseline's folder.
    label: str
    failure: str


@dataclass
class RescoreView:
    phase: Phase
    serving: int
    version: int | None = None
    state: str = "none"
    done: int = 0
    failed: int = 0
    total: int = 0
    failed_items: list[FailedItem] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self.state == RescoreState.RUNNING

    @property
    def retryable(self) -> bool:
        """Retry takes the failed items of a running or switched rescore."""
        return self.failed > 0 and self.state in (RescoreState.RUNNING, RescoreState.SWITCHED)


def phase_rescore_view(*, phase: Phase) -> RescoreView:
    """`phase`'s newest rescore as the console shows it (the served version read afresh)."""
    serving = Phase.objects.values_list("scoring_version", flat=True).get(pk=phase.pk)
    view = RescoreView(phase=phase, serving=serving)
    rescore = Rescore.objects.filter(phase=phase).order_by("-version").first()
    if rescore is None:
        return view
    counts = rescore.items.aggregate(
        total=Count("pk"),
        done=Count("pk", filter=Q(status=RescoreItemStatus.DONE)),
        failed=Count("pk", filter=Q(status=RescoreItemStatus.FAILED)),
    )
    view.version, view.state = rescore.version, rescore.state
    view.done, view.failed, view.total = counts["done"], counts["failed"], counts["total"]
    failed = (
        RescoreItem.objects.filter(rescore=rescore, status=RescoreItemStatus.FAILED)
        .select_related("entry__team", "baseline")
        .order_by("pk")[:FAILED_SHOWN]
    )
    view.failed_items = [
        FailedItem(
            submission_id=item.entry.submission_id if item.entry else "",
            label=item.entry.team.name if item.entry else str(item.baseline),
            failure=item.failure,
        )
        for item in failed
    ]
    return view
