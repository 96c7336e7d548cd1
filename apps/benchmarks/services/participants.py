"""Taking part in a challenge (SPEC §11.1): open challenges approve at once, others wait for a
host."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.benchmarks.exceptions import ChallengeNotFound
from apps.benchmarks.models import Participant, ParticipantStatus, Participation
from apps.benchmarks.selectors import challenge_get_visible, challenge_may_manage
from apps.core.exceptions import NotFound, PermissionDenied


def challenge_participate(*, user: AbstractBaseUser, slug: str) -> Participant:
    """Join the challenge (404 if the caller may not see it). Idempotent: asking again returns
    the existing row unchanged. Hosts are approved at once; the unique (challenge, user)
    constraint decides between concurrent requests."""
    challenge = challenge_get_visible(slug=slug, user=user)
    approved = challenge.participation == Participation.OPEN or challenge_may_manage(
        challenge=challenge, user=user
    )
    try:
        with transaction.atomic():
            return Participant.objects.create(
                challenge=challenge,
                user_id=user.pk,
                status=ParticipantStatus.APPROVED if approved else ParticipantStatus.PENDING,
                approved_at=timezone.now() if approved else None,
            )
    except IntegrityError:
        return Participant.objects.get(challenge=challenge, user_id=user.pk)


def participant_approve(*, user: AbstractBaseUser, slug: str, user_id: int) -> Participant:
    """A host (or staff) approves a participant; approving again changes nothing.
    PermissionDenied for anyone else; NotFound for a user who did not ask to take part."""
    try:
        challenge = challenge_get_visible(slug=slug, user=user)
    except ChallengeNotFound:
        raise
    if not challenge_may_manage(challenge=challenge, user=user):
        raise PermissionDenied("Only the challenge's hosts (and staff) approve participants.")
    Participant.objects.filter(
        challenge=challenge, user_id=user_id, status=ParticipantStatus.PENDING
    ).update(status=ParticipantStatus.APPROVED, approved_at=timezone.now())
    participant = Participant.objects.filter(challenge=challenge, user_id=user_id).first()
    if participant is None:
        raise NotFound("This user has not asked to take part in the challenge.")
    return participant
