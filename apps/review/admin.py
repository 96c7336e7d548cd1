"""Admin: reviews, claims, and submissions (with their grading attempts) with regrade /
expire-claim."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from apps.core.exceptions import DomainError
from apps.grading.admin import GradingAttemptInline
from apps.review.models import ReviewClaim, ReviewRecord, SubmissionUnderReview
from apps.review.services import review_claim_expire, submission_regrade


@admin.action(description="Regrade: back to pending with a new job", permissions=("change",))
def regrade_submissions(
    modeladmin: admin.ModelAdmin[Any], request: HttpRequest, queryset: QuerySet[Any]
) -> None:
    """Usable on any admin whose rows are submissions (their pk is the submission id)."""
    done = 0
    for submission_id in queryset.values_list("pk", flat=True):
        try:
            # Staff may regrade their own submission here (SPEC §10: an admin override).
            submission_regrade(user=request.user, submission_id=submission_id, allow_own=True)
            done += 1
        except DomainError as exc:
            modeladmin.message_user(request, f"{submission_id}: {exc.message}", messages.ERROR)
    if done:
        modeladmin.message_user(request, f"{done} submission(s) sent back to grading.")


@admin.action(description="Expire the review claim now", permissions=("change",))
def expire_claims(
    modeladmin: admin.ModelAdmin[Any],
    request: HttpRequest,
    queryset: QuerySet[Any],
) -> None:
    field = "submission_id" if queryset.model is ReviewClaim else "pk"
    expired = sum(
        review_claim_expire(submission_id=str(pk)) for pk in queryset.values_list(field, flat=True)
    )
    modeladmin.message_user(request, f"{expired} claim(s) expired.")


class ReviewRecordInline(admin.TabularInline[ReviewRecord, SubmissionUnderReview]):
    model = ReviewRecord
    extra = 0
    can_delete = False
    fields = ("created_at", "reviewer", "verdict", "score", "comment")
    readonly_fields = fields


class ReviewClaimInline(admin.TabularInline[ReviewClaim, SubmissionUnderReview]):
    model = ReviewClaim
    extra = 0
    can_delete = False
    fields = ("reviewer", "claimed_at", "expires_at")
    readonly_fields = fields


@admin.register(SubmissionUnderReview)
class SubmissionUnderReviewAdmin(admin.ModelAdmin[SubmissionUnderReview]):
    list_display = ("id", "owner", "status", "score", "attempts", "question_id", "created_at")
    list_filter = ("status", "skill")
    search_fields = ("id", "owner__username", "question_id")
    actions = [regrade_submissions, expire_claims]
    inlines = [GradingAttemptInline, ReviewClaimInline, ReviewRecordInline]
    readonly_fields = (
        "id",
        "owner",
        "status",
        "score",
        "status_reason",
        "completed_at",
        "lease_token",
        "lease_expires_at",
        "attempts",
        "entrypoint",
        "config_file",
        "question_id",
        "skill",
        "metadata",
        "created_at",
        "updated_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(ReviewClaim)
class ReviewClaimAdmin(admin.ModelAdmin[ReviewClaim]):
    list_display = ("submission", "reviewer", "claimed_at", "expires_at", "is_live")
    list_filter = ("expires_at",)
    search_fields = ("submission__id", "reviewer__username")
    readonly_fields = ("submission", "reviewer", "claimed_at", "expires_at", "is_live")
    actions = [expire_claims]

    @admin.display(boolean=True, description="live")
    def is_live(self, obj: ReviewClaim) -> bool:
        return obj.expires_at > timezone.now()

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(ReviewRecord)
class ReviewRecordAdmin(admin.ModelAdmin[ReviewRecord]):
    list_display = ("id", "submission", "reviewer", "verdict", "score", "created_at")
    list_filter = ("verdict", "created_at")
    search_fields = ("id", "submission__id", "reviewer__username", "comment")
    readonly_fields = ("id", "submission", "reviewer", "verdict", "score", "comment", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
