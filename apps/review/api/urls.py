from django.urls import URLPattern, URLResolver, path

from apps.review.api import views

_S = "review/submissions/<hexid:submission_id>/"

urlpatterns: list[URLPattern | URLResolver] = [
    path("review/queue/", views.ReviewQueueApi.as_view(), name="review-queue"),
    path(_S, views.ReviewDetailApi.as_view(), name="review-detail"),
    path(
        f"{_S}files/<fileid:file_id>/download/",
        views.ReviewFileDownloadApi.as_view(),
        name="review-file-download",
    ),
    path(f"{_S}claim/", views.ReviewClaimApi.as_view(), name="review-claim"),
    path(f"{_S}extend/", views.ReviewClaimExtendApi.as_view(), name="review-extend"),
    path(f"{_S}release/", views.ReviewClaimReleaseApi.as_view(), name="review-release"),
    path(f"{_S}complete/", views.ReviewCompleteApi.as_view(), name="review-complete"),
    path(f"{_S}regrade/", views.SubmissionRegradeApi.as_view(), name="review-regrade"),
    path("leaderboard/", views.LeaderboardApi.as_view(), name="leaderboard"),
    path(
        "leaderboard/questions/",
        views.LeaderboardQuestionsApi.as_view(),
        name="leaderboard-questions",
    ),
]
