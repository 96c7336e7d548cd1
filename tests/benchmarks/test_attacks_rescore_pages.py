"""Attacks on rescoring and the challenge pages by callers who have read the source. A secret
marker sits in the hidden reference data, and the hidden split's scores of version 1 (served)
and version 2 (being rescored) are distinctive numbers: none of them may appear in any answer a
participant can get (pages, the fragments they poll, the API, the public data, the refusals
of the hosts' doors), before or after the board switches. A participant, a stranger, a host of
nothing here and an anonymous caller try every rescore door (403 or, for a private challenge,
the very answer of an unknown one: no existence oracle) and change nothing; a host's cancel
races the switch and the retry in real threads."""

from __future__ import annotations

import hashlib
import io
import secrets
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.benchmarks.exceptions import RescoreNotRunning
from apps.benchmarks.models import (
    Entry,
    Participant,
    Phase,
    Rescore,
    RescoreItem,
    RescoreItemStatus,
    RescoreState,
)
from apps.benchmarks.services.apply import challenge_apply
from apps.benchmarks.services.rescores import (
    rescore_cancel,
    rescore_retry,
    rescore_switch_if_complete,
)
from apps.benchmarks.services.rescoring import rescore_next
from apps.benchmarks.services.reveal import phase_reveal
from tests.benchmarks.boards import acc, make_entry, make_team, record
from tests.benchmarks.bundles import bundle, grant_add_challenge
from tests.concurrency import run_concurrently
from tests.factories.tokens import make_token
from tests.factories.users import make_user
from tests.pages.challenge_support import open_now

pytestmark = pytest.mark.django_db

HIDDEN_V1 = 0.8642097531  # the hidden split's accuracy served now (printed 0.8642)
HIDDEN_V2 = 0.3141592653  # the one the running rescore wrote (printed 0.3142)
# As stored (JSON, CSV, a cell's title) and as a cell prints it.
HIDDEN_PRINTS = ("8642097531", ">0.8642<", "3141592653", ">0.3142<")
RESCORE = "/api/challenges/{slug}/phases/dev/rescore/{tail}"


@dataclass
class Setup:
    host: User
    pat: User
    phase: Phase
    entry: Entry
    marker: str


def _setup(tmp_path: Path, *, private: bool = False, rescoring: bool = True) -> Setup:
    marker = f"refmark-{secrets.token_hex(6)}"
    host = grant_add_challenge(make_user(username="hostess"))

    def change(document: dict[str, Any]) -> None:
        open_now(document)
        if private:
            document["visibility"] = "private"

    data = bundle(change, extra={f"data/ref/{marker}.txt": marker.encode()})
    path = tmp_path / "bundle.zip"
    path.write_bytes(data)
    challenge_apply(user=host, bundle_path=path, sha256=hashlib.sha256(data).hexdigest())
    phase = Phase.objects.select_related("challenge").get(challenge__slug="digits", slug="dev")
    pat = make_user(username="pat")
    Participant.objects.create(
        challenge=phase.challenge, user=pat, status="approved", approved_at=timezone.now()
    )
    entry = make_entry(phase, make_team(phase, "owls", pat))
    record(entry, 1, public=acc(0.5), private=acc(HIDDEN_V1))
    if rescoring:
        rescore = Rescore.objects.create(phase=phase, version=2)
        RescoreItem.objects.create(rescore=rescore, entry=entry, status=RescoreItemStatus.DONE)
        record(entry, 2, public=acc(0.25), private=acc(HIDDEN_V2))
    return Setup(host=host, pat=pat, phase=phase, entry=entry, marker=marker)


def _text(response: Any) -> str:
    """Everything a response carries, a zip's member names and contents included."""
    body = b"".join(response.streaming_content) if response.streaming else response.content
    parts = [body.decode("latin-1"), *(f"{k}: {v}" for k, v in response.items())]
    if body.startswith(b"PK"):
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            for name in archive.namelist():
                parts += [name, archive.read(name).decode("latin-1")]
    return "\n".join(parts)


def _participant_answers(pat: User, submission_id: str) -> list[tuple[str, int, str]]:
    page = Client()
    page.force_login(pat)
    api = APIClient()
    api.force_authenticate(pat)
    paths = [
        (page, "/challenges/"),
        (page, "/challenges/digits/"),
        (page, "/challenges/digits/fragments/board/?phase=dev"),
        (page, "/challenges/digits/fragments/mine/?phase=dev"),
        (page, "/challenges/digits/host/"),
        (page, "/challenges/digits/host/fragments/rescore/?phase=dev"),
        (api, "/api/challenges/"),
        (api, "/api/challenges/digits/"),
        (api, "/api/challenges/digits/phases/dev/leaderboard/?split=public"),
        (api, "/api/challenges/digits/phases/dev/leaderboard/?split=public&format=csv"),
        (api, "/api/challenges/digits/phases/dev/leaderboard/?split=private"),
        (api, "/api/challenges/digits/phases/dev/leaderboard/?split=public&scoring_version=2"),
        (api, "/api/challenges/digits/phases/dev/me/"),
        (api, "/api/challenges/digits/teams/mine/"),
        (api, "/api/challenges/digits/phases/dev/public-data/"),
        (api, RESCORE.format(slug="digits", tail="")),
        (api, f"/api/submissions/{submission_id}/"),
    ]
    answers = []
    for client, path in paths:
        response = client.get(path)
        answers.append((path, response.status_code, _text(response)))
    for tail in ("retry/", "cancel/"):
        refused = api.post(RESCORE.format(slug="digits", tail=tail))
        answers.append((tail, refused.status_code, _text(refused)))
    return answers


def _assert_no_secret(answers: list[tuple[str, int, str]], marker: str) -> None:
    for path, status, text in answers:
        assert status < HTTPStatus.INTERNAL_SERVER_ERROR, (path, status)
        assert marker not in text, path
        for printed in HIDDEN_PRINTS:
            assert printed not in text, (path, printed)


def test_hidden_scores_of_the_served_and_the_rescored_version_and_the_reference_never_leak(
    tmp_path: Path,
) -> None:
    s = _setup(tmp_path)
    answers = _participant_answers(s.pat, s.entry.submission_id)
    statuses = {path: status for path, status, _ in answers}
    assert statuses["/challenges/digits/host/"] == HTTPStatus.FORBIDDEN
    assert statuses["retry/"] == statuses["cancel/"] == HTTPStatus.FORBIDDEN
    mine = {path: text for path, _, text in answers}["/api/challenges/digits/phases/dev/me/"]
    assert "0.5" in mine  # the public score of the version served is there
    _assert_no_secret(answers, s.marker)

    # The board switches to version 2: its public scores show, its hidden ones still do not.
    assert rescore_switch_if_complete(rescore_id=Rescore.objects.get().pk)
    answers = _participant_answers(s.pat, s.entry.submission_id)
    assert "0.25" in {p: t for p, _, t in answers}["/api/challenges/digits/phases/dev/me/"]
    _assert_no_secret(answers, s.marker)
    assert Rescore.objects.get().state == RescoreState.SWITCHED

    # The numbers were findable all along: the host's console has them, and after the reveal
    # the participant reads the served version's hidden scores.
    host = Client()
    host.force_login(s.host)
    assert repr(HIDDEN_V2) in host.get("/challenges/digits/host/").content.decode()
    phase_reveal(phase_id=s.phase.pk, via="host")
    revealed = _participant_answers(s.pat, s.entry.submission_id)
    assert any(">0.3142<" in text for _, _, text in revealed)
    assert any("3141592653" in text for _, _, text in revealed)
    assert all("8642097531" not in text for _, _, text in revealed)


def _rescore_state() -> list[tuple[Any, ...]]:
    rows = [tuple(r) for r in Rescore.objects.values_list("pk", "state", "finished_at")]
    items = RescoreItem.objects.values_list("pk", "status", "attempts", "failure", "lease_token")
    return [*rows, *(tuple(i) for i in items)]


@pytest.mark.parametrize("private", [False, True])
def test_no_one_but_a_host_reads_or_changes_a_rescore(tmp_path: Path, private: bool) -> None:
    s = _setup(tmp_path, private=private)
    RescoreItem.objects.update(status=RescoreItemStatus.FAILED, failure="scoring_failed")
    before = _rescore_state()
    stranger = make_user(username="stranger")
    other_host = grant_add_challenge(make_user(username="otherhost"))
    for who in (s.pat, stranger, other_host, None):
        api = APIClient()
        page = Client()
        if who is not None:
            api.force_authenticate(who)
            page.force_login(who)
        may_see = who is s.pat or not private
        for method, tail in (("get", ""), ("post", "retry/"), ("post", "cancel/")):
            response = getattr(api, method)(RESCORE.format(slug="digits", tail=tail))
            unknown = getattr(api, method)(RESCORE.format(slug="nope", tail=tail))
            if who is None:
                assert response.status_code == HTTPStatus.UNAUTHORIZED
            elif may_see:
                assert response.status_code == HTTPStatus.FORBIDDEN
                assert response.json()["code"] == "permission_denied"
            else:
                assert response.status_code == HTTPStatus.NOT_FOUND
                assert response.content == unknown.content.replace(b"nope", b"digits")
            assert "scoring_failed" not in response.content.decode()
        for path in ("/host/", "/host/fragments/rescore/?phase=dev"):
            response = page.get(f"/challenges/digits{path}")
            unknown = page.get(f"/challenges/nope{path}")
            expected = HTTPStatus.FORBIDDEN if may_see or who is None else HTTPStatus.NOT_FOUND
            assert response.status_code == expected, (who, path)
            assert response.status_code == unknown.status_code or may_see
            assert s.marker not in response.content.decode()
            assert "scoring_failed" not in response.content.decode()
    assert _rescore_state() == before


def test_a_hosts_token_without_the_host_scope_reads_and_changes_no_rescore(
    tmp_path: Path,
) -> None:
    s = _setup(tmp_path)
    RescoreItem.objects.update(status=RescoreItemStatus.FAILED, failure="scoring_failed")
    before = _rescore_state()
    api = APIClient()
    token = make_token(s.host, scopes=["read", "submit"])
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    for method, tail in (("get", ""), ("post", "retry/"), ("post", "cancel/")):
        response = getattr(api, method)(RESCORE.format(slug="digits", tail=tail))
        assert response.status_code == HTTPStatus.FORBIDDEN, (tail, response.content)
        assert response.json()["code"] == "insufficient_scope"
    assert _rescore_state() == before


@pytest.mark.parametrize(
    "phase", ["dev%00", "dev\x00", "../code", "dev/../dev", "DEV", "d" * 300, "dev&phase=code"]
)
def test_hostile_phase_names_in_the_polled_fragments_are_404(tmp_path: Path, phase: str) -> None:
    s = _setup(tmp_path, rescoring=False)
    host = Client()
    host.force_login(s.host)
    participant = Client()
    participant.force_login(s.pat)
    for client, part in (
        (participant, "fragments/board"),
        (participant, "fragments/mine"),
        (host, "host/fragments/rescore"),
    ):
        response = client.get(f"/challenges/digits/{part}/", {"phase": phase})
        assert response.status_code == HTTPStatus.NOT_FOUND, (part, phase)


@pytest.mark.django_db(transaction=True)
def test_a_hosts_cancel_racing_the_switch_leaves_one_consistent_outcome(tmp_path: Path) -> None:
    s = _setup(tmp_path, rescoring=False)
    for version in range(2, 8):
        Phase.objects.filter(pk=s.phase.pk).update(scoring_version=1)
        rescore = Rescore.objects.create(phase=s.phase, version=version)
        RescoreItem.objects.create(rescore=rescore, entry=s.entry, status=RescoreItemStatus.DONE)

        def act(index: int, rescore_id: int = rescore.pk) -> object:
            if index == 0:
                return rescore_cancel(user=s.host, slug="digits", phase_slug="dev")
            return rescore_switch_if_complete(rescore_id=rescore_id)

        cancelled, switched = run_concurrently(act, 2)
        state = Rescore.objects.get(pk=rescore.pk).state
        serving = Phase.objects.get(pk=s.phase.pk).scoring_version
        assert switched.ok, switched.error
        if switched.value:
            assert (state, serving) == (RescoreState.SWITCHED, version)
            assert isinstance(cancelled.error, RescoreNotRunning)
        else:
            assert (state, serving) == (RescoreState.CANCELLED, 1)
            assert cancelled.ok, cancelled.error


@pytest.mark.django_db(transaction=True)
def test_a_retry_racing_a_cancel_never_gets_a_cancelled_rescores_items_scored(
    tmp_path: Path,
) -> None:
    s = _setup(tmp_path, rescoring=False)
    calls: dict[int, Callable[[], object]] = {
        0: lambda: rescore_cancel(user=s.host, slug="digits", phase_slug="dev"),
        1: lambda: rescore_retry(user=s.host, slug="digits", phase_slug="dev"),
    }
    for version in range(2, 8):
        rescore = Rescore.objects.create(phase=s.phase, version=version)
        RescoreItem.objects.create(
            rescore=rescore, entry=s.entry, status=RescoreItemStatus.FAILED, failure="x"
        )
        outcomes = run_concurrently(lambda i: calls[i](), 2)
        assert all(outcome.ok for outcome in outcomes), [o.error for o in outcomes]
        assert Rescore.objects.get(pk=rescore.pk).state == RescoreState.CANCELLED
        # Whatever the retry set back to pending, no worker takes an item of a cancelled
        # rescore, and its version never reaches the board.
        assert rescore_next(rescore_id=rescore.pk) == "idle"
        assert not s.entry.scores.filter(version=version).exists()
        assert Phase.objects.get(pk=s.phase.pk).scoring_version == 1
