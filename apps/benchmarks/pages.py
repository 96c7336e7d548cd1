"""The challenge pages (SPEC §11.7): `/challenges/`, `/challenges/{slug}/` and the hosts'
`/challenges/{slug}/host/`. They read through the benchmarks selectors and render templates;
every write (taking part, teams, submitting, reveal) is a call of the API from the page's
script, so each write still goes through its one service. Parts of a page that change while
it is open (the leaderboard tabs, the team's submissions) are also served alone as HTML
fragments the page polls, rendered by the same templates."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as PageForbidden
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from apps.benchmarks.board_selectors import board_access
from apps.benchmarks.host_selectors import host_entries_detail, host_entry_list
from apps.benchmarks.page_selectors import (
    STATUSES,
    challenge_cards,
    challenge_grants,
    challenge_page,
    challenge_phase,
    challenge_refunds,
    challenge_teams,
    phase_view,
)
from apps.benchmarks.rescore_selectors import phase_rescore_view
from apps.benchmarks.selectors import challenge_get_visible, challenge_may_manage
from apps.core.exceptions import DomainError
from apps.core.exceptions import PermissionDenied as DomainPermissionDenied
from apps.core.pages import upload_form_context

#: The challenge pages load nothing from another origin and run no inline script.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
#: Submissions per phase on the hosts' console (the API pages through all of them).
HOST_ENTRIES = 200

View = Callable[..., HttpResponse]


def challenge_page_view(view: View) -> View:
    """GET only, the strict CSP, and a domain refusal as the page's 404 or 403."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            response = view(request, *args, **kwargs)
        except DomainPermissionDenied as exc:
            raise PageForbidden(exc.message) from exc
        except DomainError as exc:
            if exc.http_status == 404:
                raise Http404(exc.message) from exc
            raise
        response["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        return response

    return require_GET(wrapped)


def _poll_ms() -> int:
    return int(settings.PAGES_POLL_INTERVAL_MS)


@challenge_page_view
def challenges_page(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "").strip()[:100]
    status = request.GET.get("status", "")
    cards = challenge_cards(user=request.user, query=query, status=status, now=timezone.now())
    context = {"cards": cards, "q": query, "status": status, "statuses": STATUSES}
    return render(request, "pages/challenges.html", context)


@challenge_page_view
def challenge_detail_page(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = challenge_get_visible(slug=slug, user=request.user)
    page = challenge_page(challenge=challenge, user=request.user, now=timezone.now())
    context = {
        "page": page,
        "challenge": challenge,
        "poll_ms": _poll_ms(),
        **upload_form_context(),
    }
    return render(request, "pages/challenge.html", context)


def _phase_or_404(request: HttpRequest, slug: str) -> Any:
    challenge = challenge_get_visible(slug=slug, user=request.user)
    phase = challenge_phase(challenge=challenge, phase_slug=request.GET.get("phase", ""))
    if phase is None:
        raise Http404("No such phase.")
    return phase


@challenge_page_view
def challenge_board_fragment(request: HttpRequest, slug: str) -> HttpResponse:
    """A phase's leaderboard tabs alone (the page polls it)."""
    phase = _phase_or_404(request, slug)
    view = phase_view(phase=phase, user=request.user, in_team=False, now=timezone.now())
    return render(request, "pages/challenge/board.html", {"view": view})


@challenge_page_view
def challenge_mine_fragment(request: HttpRequest, slug: str) -> HttpResponse:
    """The caller's team's limits and submissions in a phase alone (the page polls it)."""
    if not request.user.is_authenticated:
        raise Http404("Not signed in.")
    phase = _phase_or_404(request, slug)
    # NotFound (404) without a team in the challenge.
    view = phase_view(
        phase=phase, user=request.user, in_team=True, now=timezone.now(), boards=False
    )
    return render(request, "pages/challenge/mine.html", {"view": view})


def _hosted_challenge(request: HttpRequest, slug: str) -> Any:
    """The challenge if the caller is one of its hosts (or staff); 403 for anyone else who
    may see it, 404 for anyone who may not."""
    if not request.user.is_authenticated:
        raise PageForbidden("Hosts only.")
    challenge = challenge_get_visible(slug=slug, user=request.user)
    if not challenge_may_manage(challenge=challenge, user=request.user):
        raise PageForbidden("Only the challenge's hosts (and staff) use its console.")
    return challenge


@challenge_page_view
def challenge_rescore_fragment(request: HttpRequest, slug: str) -> HttpResponse:
    """A phase's rescore section of the hosts' console alone (the console polls it while
    the rescore runs)."""
    challenge = _hosted_challenge(request, slug)
    phase = challenge_phase(challenge=challenge, phase_slug=request.GET.get("phase", ""))
    if phase is None:
        raise Http404("No such phase.")
    rescore = phase_rescore_view(phase=phase)
    return render(request, "pages/challenge/rescore.html", {"rescore": rescore})


@challenge_page_view
def challenge_host_page(request: HttpRequest, slug: str) -> HttpResponse:
    """Hosts and staff: every submission of every phase with both stages' logs, refunds,
    grants and the reveal. Anyone else who may see the challenge gets 403."""
    challenge = _hosted_challenge(request, slug)
    phases = []
    for phase in challenge.phases.all():
        access = board_access(slug=slug, phase_slug=phase.slug, user=request.user)
        entries = list(host_entry_list(access=access)[:HOST_ENTRIES])
        detail = host_entries_detail(entries=entries, version=access.phase.scoring_version)
        phases.append(
            {
                "phase": access.phase,
                "metrics": list(phase.metrics.all()),
                "entries": detail,
                "rescore": phase_rescore_view(phase=access.phase),
            }
        )
    context = {
        "challenge": challenge,
        "phases": phases,
        "grants": challenge_grants(challenge=challenge),
        "refunds": challenge_refunds(challenge=challenge),
        "teams": challenge_teams(challenge=challenge),
        "poll_ms": _poll_ms(),
    }
    return render(request, "pages/challenge_host.html", context)
