"""`yoyaku challenge push` of a bundle over `MAX_UPLOAD_FILE_SIZE`: through `/api/uploads/`
(the IETF draft, interop version 8), then applied by its upload id, dry run included; the
real console script against a live server, through a proxy that counts what reached it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from apps.benchmarks.models import Challenge
from tests.benchmarks.bundles import EXAMPLE, grant_add_challenge
from tests.client.conftest import Cli, token_for
from tests.client.proxy import FaultProxy
from tests.factories.users import make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

UPLOAD_PATH = r"^/api/uploads/[^/]+/$"
CREATE_PATH = r"^/api/uploads/$"


def test_push_sends_a_bundle_over_the_limit_resumably(
    cli: Cli, proxy: FaultProxy, tmp_path: Path, settings: Any
) -> None:
    settings.MAX_UPLOAD_FILE_SIZE = 1024
    host = cli.as_user(token_for(grant_add_challenge(make_user(username="hana")))).via(proxy.url)

    planned = host.run(
        "challenge", "push", str(EXAMPLE), "--dry-run", YOYAKU_UPLOAD_CHUNK_SIZE="1000"
    )
    assert planned.code == 0, planned.stderr
    assert "+ visibility: public" in planned.stdout.splitlines()
    assert not Challenge.objects.exists()
    assert proxy.count("POST", CREATE_PATH) == 1
    assert proxy.count("PATCH", UPLOAD_PATH) >= 2

    created = host.json("challenge", "push", str(EXAMPLE), YOYAKU_UPLOAD_CHUNK_SIZE="1000")
    assert created["slug"] == "digits"
    assert Challenge.objects.filter(slug="digits").exists()
    assert proxy.count("POST", CREATE_PATH) == 2
    # The multipart form was never used: every bundle went through /api/uploads/.
    assert proxy.body_bytes("POST", r"^/api/challenges/$") < 200
