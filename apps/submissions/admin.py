from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, QuerySet, Sum
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from apps.submissions.models import Submission, SubmissionFile
from apps.submissions.services.storage import submission_delete, submission_draft_delete


@admin.display(description="download")
def file_download_link(file: SubmissionFile) -> str:
    """A link to the file's download (the admin is staff-only, and staff read every file; the
    bytes come as an attachment, never rendered)."""
    if file.pk is None:
        return "-"
    url = reverse(
        "submission-file-download",
        kwargs={"submission_id": file.submission_id, "file_id": file.pk},
    )
    return format_html('<a href="{}" download>download</a>', url)


class SubmissionFileInline(admin.TabularInline[SubmissionFile, Submission]):
    model = SubmissionFile
    extra = 0
    can_delete = False
    fields = ("filename", "size", "sha256", "storage_name", "uploaded_at", "download")
    readonly_fields = fields

    @admin.display(description="download")
    def download(self, file: SubmissionFile) -> str:
        return file_download_link(file)

    ordering = ("uploaded_at", "id")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin[Submission]):
    list_display = (
        "id",
        "owner",
        "status",
        "kind",
        "question_id",
        "skill",
        "file_count",
        "total_size",
        "score",
        "created_at",
    )
    list_filter = ("status", "kind", "created_at")
    search_fields = ("id", "owner__username", "question_id", "skill")
    list_select_related = ("owner",)
    readonly_fields = (
        "id",
        "owner",
        "status",
        "kind",
        "file_types",
        "file_count",
        "total_size",
        "score",
        "status_reason",
        "completed_at",
        "lease_token",
        "lease_expires_at",
        "attempts",
        "created_at",
        "updated_at",
    )
    fields = (
        *readonly_fields[:3],
        "entrypoint",
        "config_file",
        "metadata",
        "question_id",
        "skill",
        *readonly_fields[3:],
    )
    inlines = (SubmissionFileInline,)
    actions = ("delete_drafts_with_files",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Submission]:
        return (
            super()
            .get_queryset(request)
            .annotate(_file_count=Count("files"), _total_size=Sum("files__size"))
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Submissions are created through the API, which stores and checks their files.
        return False

    @admin.display(description="files", ordering="_file_count")
    def file_count(self, obj: Submission) -> int:
        return int(getattr(obj, "_file_count", 0) or 0)

    @admin.display(description="total size (bytes)", ordering="_total_size")
    def total_size(self, obj: Submission) -> int:
        return int(getattr(obj, "_total_size", 0) or 0)

    @admin.action(
        description="Delete selected drafts with their stored files",
        permissions=("delete",),
    )
    def delete_drafts_with_files(
        self, request: HttpRequest, queryset: QuerySet[Submission]
    ) -> None:
        deleted = skipped = 0
        for submission_id in queryset.values_list("id", flat=True):
            if submission_draft_delete(submission_id=submission_id) is None:
                skipped += 1
            else:
                deleted += 1
        self.message_user(request, f"Deleted {deleted} drafts; skipped {skipped} non-drafts.")
        if skipped:
            self.message_user(request, "Only drafts are deleted by this action.", messages.WARNING)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        # Files go with their submission (rows and stored objects, through the service); they
        # are read-only on their own, which must not block deleting the submission.
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        perms_needed.discard(str(SubmissionFile._meta.verbose_name))
        return deleted, counts, perms_needed, protected

    def delete_model(self, request: HttpRequest, obj: Submission) -> None:
        submission_delete(submission_id=obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Submission]) -> None:
        for submission_id in queryset.values_list("id", flat=True):
            submission_delete(submission_id=submission_id)


@admin.register(SubmissionFile)
class SubmissionFileAdmin(admin.ModelAdmin[SubmissionFile]):
    list_display = ("filename", "submission", "size", "sha256", "uploaded_at", "download")
    list_filter = ("uploaded_at", "submission__status")
    search_fields = ("filename", "sha256", "submission__id", "submission__owner__username")
    list_select_related = ("submission",)
    readonly_fields = (
        "submission",
        "filename",
        "size",
        "sha256",
        "storage_name",
        "uploaded_at",
        "download",
    )

    @admin.display(description="download")
    def download(self, file: SubmissionFile) -> str:
        return file_download_link(file)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
