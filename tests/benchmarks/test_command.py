"""`manage.py apply_bundle`: the example folder applied as `make run` applies it."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from apps.benchmarks.models import Challenge
from tests.benchmarks.bundles import EXAMPLE


def _run(*args: str) -> str:
    out = StringIO()
    call_command("apply_bundle", *args, stdout=out)
    return out.getvalue()


def test_the_example_folder_is_created_then_unchanged(host: User) -> None:
    assert "0 changes" not in _run(str(EXAMPLE), "--user", "alice", "--dry-run")
    assert not Challenge.objects.exists()

    assert _run(str(EXAMPLE), "--user", "alice") == "digits: created, bundle version 1\n"
    assert _run(str(EXAMPLE), "--user", "alice") == "digits: unchanged, bundle version 1\n"


def test_a_refused_bundle_names_its_code(db: None, other_user: User) -> None:
    with pytest.raises(CommandError, match="permission_denied"):
        _run(str(EXAMPLE), "--user", "bob")
