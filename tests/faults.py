"""Test-only fault injection: answer 503 to the next N requests of a kind.

Mounted only by `config/test_settings.py` (never by the production settings), and inert until
a test arms it, so no deployed process can be made to fail on purpose.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

_lock = threading.Lock()
_faults: list[tuple[Callable[[HttpRequest], bool], list[int]]] = []


def fail_next(matcher: Callable[[HttpRequest], bool], times: int) -> None:
    """Answer 503 to the next `times` requests for which `matcher(request)` is true."""
    with _lock:
        _faults.append((matcher, [times]))


def clear() -> None:
    with _lock:
        _faults.clear()


class FaultInjectionMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with _lock:
            for matcher, remaining in _faults:
                if remaining[0] > 0 and matcher(request):
                    remaining[0] -= 1
                    # Drain the body like a real failing server that read the request.
                    request.read()
                    return JsonResponse(
                        {"success": False, "code": "unavailable", "error": "Injected fault."},
                        status=503,
                    )
        return self.get_response(request)
