"""The bundled web pages. They only render templates: all data comes from the API (session
auth + CSRF), so no logic is implemented twice."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.mixins import LoginRequiredMixin, UserPassesTestMixin
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.shortcuts import redirect
from django.views.generic import TemplateView

from apps.core.permissions import user_is_reviewer


class HomePage(TemplateView):
    """`/`: a signed-in user goes to the submit page; a visitor reads what Yoyaku is."""

    template_name = "pages/home.html"

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.user.is_authenticated:
            return redirect("submit")
        return super().dispatch(request, *args, **kwargs)


def upload_form_context() -> dict[str, Any]:
    """What a page's upload form tells its script: files over `resumable_over` bytes (the
    smaller of PAGES_RESUMABLE_OVER_BYTES and MAX_UPLOAD_FILE_SIZE, over which a file cannot go
    in one request) go as resumable uploads in slices of `slice_bytes`, the rest in one
    request each; `max_size` is the largest file (MAX_RESUMABLE_UPLOAD_SIZE) as people read it."""
    return {
        "max_size": _size_text(int(settings.MAX_RESUMABLE_UPLOAD_SIZE)),
        "resumable_over": min(
            int(settings.PAGES_RESUMABLE_OVER_BYTES), int(settings.MAX_UPLOAD_FILE_SIZE)
        ),
        "slice_bytes": max(1, int(settings.PAGES_UPLOAD_SLICE_BYTES)),
        "retry_delay_ms": settings.PAGES_RETRY_BASE_DELAY_MS,
    }


def _size_text(size: int) -> str:
    for unit, scale in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if size >= scale:
            return f"{size / scale:g} {unit}" if size % scale == 0 else f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


class SubmitPage(LoginRequiredMixin, TemplateView):
    template_name = "pages/submit.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(upload_form_context())
        context["poll_ms"] = settings.PAGES_POLL_INTERVAL_MS
        return context


class JobsPage(LoginRequiredMixin, TemplateView):
    template_name = "pages/jobs.html"


class JobDetailPage(LoginRequiredMixin, TemplateView):
    template_name = "pages/job_detail.html"


class LeaderboardPage(LoginRequiredMixin, TemplateView):
    """Public while `LEADERBOARD_PUBLIC` is on; otherwise a login is required, as elsewhere."""

    template_name = "pages/leaderboard.html"

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if settings.LEADERBOARD_PUBLIC:
            return TemplateView.dispatch(self, request, *args, **kwargs)
        return super().dispatch(request, *args, **kwargs)


class ReviewerRequiredMixin(UserPassesTestMixin):
    """Reviewers only: a visitor is sent to the login page, a signed-in non-reviewer gets 403."""

    request: HttpRequest

    def test_func(self) -> bool:
        return user_is_reviewer(self.request.user)


class ReviewPage(ReviewerRequiredMixin, TemplateView):
    template_name = "pages/review.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        # Renew the claim well before it expires.
        context["extend_ms"] = int(max(1.0, float(settings.REVIEW_CLAIM_TTL) / 3) * 1000)
        return context
