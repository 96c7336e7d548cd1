from django.urls import URLPattern, URLResolver, path

from apps.quotas.api.views import ReservationExtendApi, ReservationReleaseApi

urlpatterns: list[URLPattern | URLResolver] = [
    # quotas/me/ and quotas/reservations/ count jobs: served by apps.jobs.api.urls.
    path(
        "quotas/reservations/<hexid:reservation_id>/release/",
        ReservationReleaseApi.as_view(),
        name="reservation-release",
    ),
    path(
        "quotas/reservations/<hexid:reservation_id>/extend/",
        ReservationExtendApi.as_view(),
        name="reservation-extend",
    ),
]
