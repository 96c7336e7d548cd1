from django.urls import path

from apps.core.api.views import ApiIndexApi, MeApi

urlpatterns = [
    path("", ApiIndexApi.as_view(), name="api-index"),
    path("me/", MeApi.as_view(), name="me"),
]
