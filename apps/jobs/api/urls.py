from django.urls import URLPattern, URLResolver, path

from apps.jobs.api.quota_views import QuotaMeApi, ReservationListCreateApi
from apps.jobs.api.views import JobCancelApi, JobDetailApi, JobListCreateApi, JobLogsApi

urlpatterns: list[URLPattern | URLResolver] = [
    path("jobs/", JobListCreateApi.as_view(), name="jobs"),
    path("jobs/<hexid:job_id>/", JobDetailApi.as_view(), name="job-detail"),
    path("jobs/<hexid:job_id>/cancel/", JobCancelApi.as_view(), name="job-cancel"),
    path("jobs/<hexid:job_id>/logs/", JobLogsApi.as_view(), name="job-logs"),
    # The quotas' paths whose answers count jobs (quotas do not depend on jobs).
    path("quotas/me/", QuotaMeApi.as_view(), name="quota-me"),
    path("quotas/reservations/", ReservationListCreateApi.as_view(), name="reservations"),
]
