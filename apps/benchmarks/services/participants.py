"""Taking part in a challenge (SPEC §11.1): open challenges approve at once, others wait for a
host."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

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
    """A host (or staff) admits a user: a pending participant is approved, a user who has not
    asked is admitted at once (the only way into a private challenge, which others cannot see
    to ask). Approving again changes nothing. PermissionDenied for anyone else; NotFound for
    an unknown user. The approval is a compare-and-set (pending → approved); a concurrent
    request to take part is decided by the unique (challenge, user) constraint."""
    challenge = challenge_get_visible(slug=slug, user=user)
    if not challenge_may_manage(challenge=challenge, user=user):
        raise PermissionDenied("Only the challenge's hosts (and staff) approve participants.")
    if not get_user_model().objects.filter(pk=user_id).exists():
        raise NotFound("No such user.")
    now = timezone.now()
    try:
        with transaction.atomic():
            Participant.objects.get_or_create(
                challenge=challenge,
                user_id=user_id,
                defaults={"status": ParticipantStatus.APPROVED, "approved_at": now},
            )
    except IntegrityError:
        pass  # asked at the same instant: the row exists, approved below
    Participant.objects.filter(
        challenge=challenge, user_id=user_id, status=ParticipantStatus.PENDING
    ).update(status=ParticipantStatus.APPROVED, approved_at=now)
    return Participant.objects.select_related("user").get(challenge=challenge, user_id=user_id)
