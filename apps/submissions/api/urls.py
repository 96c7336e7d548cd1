from django.urls import URLPattern, URLResolver, path

from apps.submissions.api import uploads, views

urlpatterns: list[URLPattern | URLResolver] = [
    path("submissions/", views.SubmissionListCreateApi.as_view(), name="submission-list"),
    path(
        "submissions/<hexid:submission_id>/",
        views.SubmissionDetailApi.as_view(),
        name="submission-detail",
    ),
    path(
        "submissions/<hexid:submission_id>/files/",
        views.SubmissionFileListCreateApi.as_view(),
        name="submission-files",
    ),
    path(
        "submissions/<hexid:submission_id>/files/<fileid:file_id>/download/",
        views.SubmissionFileDownloadApi.as_view(),
        name="submission-file-download",
    ),
    path("uploads/", uploads.UploadListApi.as_view(), name="upload-list"),
    path("uploads/<hexid:upload_id>/", uploads.UploadDetailApi.as_view(), name="upload-detail"),
]
