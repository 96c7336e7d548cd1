"""URLs of the challenge pages (included at the site's root by config/urls.py)."""

from django.urls import URLPattern, path

from apps.benchmarks.pages import (
    challenge_board_fragment,
    challenge_detail_page,
    challenge_host_page,
    challenge_mine_fragment,
    challenge_rescore_fragment,
    challenges_page,
)

urlpatterns: list[URLPattern] = [
    path("challenges/", challenges_page, name="challenges"),
    path("challenges/<slug:slug>/", challenge_detail_page, name="challenge-page"),
    path("challenges/<slug:slug>/host/", challenge_host_page, name="challenge-host-page"),
    path(
        "challenges/<slug:slug>/fragments/board/",
        challenge_board_fragment,
        name="challenge-board-fragment",
    ),
    path(
        "challenges/<slug:slug>/fragments/mine/",
        challenge_mine_fragment,
        name="challenge-mine-fragment",
    ),
    path(
        "challenges/<slug:slug>/host/fragments/rescore/",
        challenge_rescore_fragment,
        name="challenge-rescore-fragment",
    ),
]
