from django.urls import path

from apps.core.api.views import MeApi

urlpatterns = [
    path("me/", MeApi.as_view(), name="me"),
]
