"""Reads of challenges: who may see which, and a challenge as its bundle describes it."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Prefetch, Q, QuerySet

from apps.benchmarks.exceptions import ChallengeNotFound
from apps.benchmarks.models import (
    Challenge,
    ChallengeHost,
    Participant,
    ParticipantStatus,
    Phase,
    ScoringVersion,
    Visibility,
)

AnyUser = AbstractBaseUser | AnonymousUser


def _staff(user: AnyUser) -> bool:
    return bool(getattr(user, "is_staff", False))


def challenge_get(*, slug: str, for_update: bool = False) -> Challenge | None:
    queryset = Challenge.objects.filter(slug=slug)
    if for_update:
        queryset = queryset.select_for_update(of=("self",))
    return queryset.first()


def bundle_files_named(*, prefix: str) -> set[str]:
    """Stored bundle names under `prefix` that a challenge (its current bundle) or a scoring
    version (a bundle kept for rescoring) names."""
    current = Challenge.objects.filter(bundle_file__startswith=prefix).values_list(
        "bundle_file", flat=True
    )
    kept = ScoringVersion.objects.filter(bundle_file__startswith=prefix).values_list(
        "bundle_file", flat=True
    )
    return set(current) | set(kept)


def challenge_is_host(*, challenge: Challenge, user: AnyUser) -> bool:
    if not user.is_authenticated:
        return False
    return ChallengeHost.objects.filter(challenge=challenge, user_id=user.pk).exists()


def challenge_may_manage(*, challenge: Challenge, user: AnyUser) -> bool:
    """Hosts and staff may change a challenge, approve participants and see everything."""
    return _staff(user) or challenge_is_host(challenge=challenge, user=user)


def _with_details(queryset: QuerySet[Challenge]) -> QuerySet[Challenge]:
    phases = Phase.objects.prefetch_related("metrics", "splits").order_by("order")
    return queryset.prefetch_related(
        Prefetch("phases", queryset=phases),
        Prefetch("hosts", queryset=ChallengeHost.objects.select_related("user")),
    )


def _seen_by(user: AnyUser) -> Q:
    """Private challenges are seen by their hosts and approved participants (and staff)."""
    if _staff(user):
        return Q()
    visible = ~Q(visibility=Visibility.PRIVATE)
    if not user.is_authenticated:
        return visible
    return (
        visible
        | Q(hosts__user_id=user.pk)
        | Q(participants__user_id=user.pk, participants__status=ParticipantStatus.APPROVED)
    )


def challenge_list(*, user: AnyUser) -> QuerySet[Challenge]:
    """Public challenges, and those the caller hosts or takes part in (unlisted and private
    ones are not listed to others)."""
    listed = Q(visibility=Visibility.PUBLIC)
    if _staff(user):
        listed = Q()
    elif user.is_authenticated:
        listed |= Q(hosts__user_id=user.pk) | Q(
            participants__user_id=user.pk, participants__status=ParticipantStatus.APPROVED
        )
    ids = Challenge.objects.filter(listed).values("id")
    return _with_details(Challenge.objects.filter(id__in=ids)).order_by("slug")


def challenge_get_visible(*, slug: str, user: AnyUser) -> Challenge:
    """The challenge if the caller may see it; ChallengeNotFound (404) otherwise, the same
    answer as for a slug that does not exist."""
    ids = Challenge.objects.filter(_seen_by(user), slug=slug).values("id")
    challenge = _with_details(Challenge.objects.filter(id__in=ids)).first()
    if challenge is None:
        raise ChallengeNotFound()
    return challenge


def participant_get(*, challenge: Challenge, user_id: int) -> Participant | None:
    return Participant.objects.filter(challenge=challenge, user_id=user_id).first()


def challenge_seen_ids(*, user: AnyUser) -> QuerySet[Challenge, Any]:
    """The ids of the challenges the caller may see, as a subquery."""
    return Challenge.objects.filter(_seen_by(user)).values("id")


def challenge_get_seen(*, slug: str, user: AnyUser) -> Challenge:
    """The challenge row alone (nothing prefetched) if the caller may see it; ChallengeNotFound
    (404) otherwise, as `challenge_get_visible`."""
    ids = challenge_seen_ids(user=user).filter(slug=slug)
    challenge = Challenge.objects.filter(id__in=ids).first()
    if challenge is None:
        raise ChallengeNotFound()
    return challenge
