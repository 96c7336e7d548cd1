from django.urls import URLPattern, URLResolver, path, register_converter

from apps.submissions.api import views


class SubmissionIdConverter:
    """32 lowercase hex characters; anything else is an unknown path (JSON 404), so a stray
    byte (NUL, which PostgreSQL cannot even compare) never reaches a query."""

    regex = "[0-9a-f]{32}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(SubmissionIdConverter, "submission_id")

urlpatterns: list[URLPattern | URLResolver] = [
    path("submissions/", views.SubmissionListCreateApi.as_view(), name="submission-list"),
    path(
        "submissions/<submission_id:submission_id>/",
        views.SubmissionDetailApi.as_view(),
        name="submission-detail",
    ),
    path(
        "submissions/<submission_id:submission_id>/files/",
        views.SubmissionFileListCreateApi.as_view(),
        name="submission-files",
    ),
]
