from django.urls import path

from apps.core.api.token_views import TokenDetailApi, TokenListCreateApi
from apps.core.api.views import ApiIndexApi, MeApi

urlpatterns = [
    path("", ApiIndexApi.as_view(), name="api-index"),
    path("me/", MeApi.as_view(), name="me"),
    path("tokens/", TokenListCreateApi.as_view(), name="tokens"),
    path("tokens/<hexid:token_id>/", TokenDetailApi.as_view(), name="token-detail"),
]
