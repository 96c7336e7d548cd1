from django.urls import URLPattern, URLResolver, path

from apps.quotas.api.views import (
    QuotaMeApi,
    ReservationExtendApi,
    ReservationListCreateApi,
    ReservationReleaseApi,
)

urlpatterns: list[URLPattern | URLResolver] = [
    path("quotas/me/", QuotaMeApi.as_view(), name="quota-me"),
    path("quotas/reservations/", ReservationListCreateApi.as_view(), name="reservations"),
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
