"""The reference data and the scoring program are the host's secrets: a random marker placed in
them (in a file's content and in a file's name) never reaches a participant, a stranger or the
log, on any read of the challenge."""

from __future__ import annotations

import io
import secrets
import zipfile
from collections.abc import Callable
from http import HTTPStatus

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tests.benchmarks.bundles import bundle, example_files
from tests.benchmarks.conftest import Apply
from tests.factories.users import make_user


def _secret_bundle(marker: str) -> bytes:
    files = example_files()
    extra = {
        "data/ref/labels.csv": files["data/ref/labels.csv"] + f"{marker},0\n".encode(),
        f"data/ref/{marker}.txt": marker.encode(),
        "scoring/score.py": files["scoring/score.py"] + f"\n# {marker}\n".encode(),
        f"scoring/{marker}.py": f"SECRET = '{marker}'\n".encode(),
    }
    return bundle(extra=extra)


def _everything_readable(client: APIClient) -> list[bytes]:
    """Every answer a challenge's reader can get, zipped public data unpacked."""
    bodies = [client.get("/api/challenges/").content]
    bodies.append(client.get("/api/challenges/digits/").content)
    bodies.append(client.post("/api/challenges/digits/participate/").content)
    for phase in ("dev", "code"):
        response = client.get(f"/api/challenges/digits/phases/{phase}/public-data/")
        body = response.getvalue()  # the streamed zip joined, or the error body
        bodies.append(body)
        if response.status_code == HTTPStatus.OK:
            with zipfile.ZipFile(io.BytesIO(body)) as archive:
                for name in archive.namelist():
                    bodies.extend((name.encode(), archive.read(name)))
    return bodies


def test_no_reader_sees_the_reference_data_or_the_scoring_program(
    host: User,
    apply_as: Callable[[User], Apply],
    client_for: Callable[[User], APIClient],
    caplog: pytest.LogCaptureFixture,
) -> None:
    marker = f"hidden-{secrets.token_hex(8)}"
    applied = apply_as(host)(_secret_bundle(marker))
    assert applied.status_code == HTTPStatus.CREATED, applied.content

    participant = make_user(username="pat")
    readers = [client_for(participant), client_for(make_user(username="stranger"))]
    caplog.clear()
    for reader in readers:
        answers = _everything_readable(reader)
        assert answers, "nothing was read"
        for body in answers:
            assert marker.encode() not in body
    # The participant did read the challenge and its public data: the check looked at real
    # answers, not at refusals.
    detail = readers[0].get("/api/challenges/digits/")
    assert detail.status_code == HTTPStatus.OK
    assert {phase["slug"] for phase in detail.json()["phases"]} == {"dev", "code"}
    public = readers[0].get("/api/challenges/digits/phases/dev/public-data/")
    assert public.status_code == HTTPStatus.OK
    assert public.getvalue().startswith(b"PK")  # read whole: the test client closes it
    assert all(marker not in record.getMessage() for record in caplog.records)
