from django.contrib import admin
from django.templatetags.static import static
from django.urls import URLPattern, URLResolver, include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from apps.core.api.views import ApiNotFound, bad_request, healthz
from apps.core.ops import metrics_view, ops_page
from apps.core.pages import (
    HomePage,
    JobDetailPage,
    JobsPage,
    LeaderboardPage,
    ReviewPage,
    SubmitPage,
)

admin.site.site_header = "Yoyaku administration"
admin.site.site_title = "Yoyaku admin"
admin.site.index_title = "Jobs, quotas, submissions, review and schedules"
# The app list beside every page took a quarter of a 1280 px screen from the change lists'
# columns; the breadcrumbs and the index page lead to every model.
admin.site.enable_nav_sidebar = False

api_patterns: list[URLPattern | URLResolver] = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("", include("apps.core.api.urls")),
    path("", include("apps.submissions.api.urls")),
    path("", include("apps.quotas.api.urls")),
    path("", include("apps.jobs.api.urls")),
    path("", include("apps.review.api.urls")),
    path("", include("apps.schedule.api.urls")),
    path("", include("apps.benchmarks.api.urls")),
    re_path(r"^.*$", ApiNotFound.as_view(), name="api-not-found"),
]

# A 400 Django raises itself (a `Host` not in ALLOWED_HOSTS) is the API's JSON error body.
handler400 = bad_request

urlpatterns = [
    path("", HomePage.as_view(), name="home"),
    # Browsers and crawlers ask for /favicon.ico whatever the page's <link rel="icon"> says.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.ico"), permanent=True)),
    path("submit/", SubmitPage.as_view(), name="submit"),
    path("jobs/", JobsPage.as_view(), name="jobs"),
    path("jobs/<str:job_id>/", JobDetailPage.as_view(), name="job-detail"),
    path("leaderboard/", LeaderboardPage.as_view(), name="leaderboard"),
    path("review/", ReviewPage.as_view(), name="review"),
    path("", include("apps.benchmarks.page_urls")),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("ops/", ops_page, name="ops"),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include(api_patterns)),
]
