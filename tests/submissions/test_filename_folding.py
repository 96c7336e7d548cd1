"""One case-folding rule for file names on SQLite and PostgreSQL (`filename_fold`): names that
differ only by case — non-ASCII case included — or by Unicode normalization form are one name,
whether they arrive one by one, together in a bulk create, racing, or through the API."""

from __future__ import annotations

import unicodedata
from http import HTTPStatus

import pytest
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from rest_framework.test import APIClient

from apps.submissions.exceptions import DuplicateFilename
from apps.submissions.models import SubmissionFile, filename_fold
from apps.submissions.services.drafts import submission_create, submission_file_add
from tests.concurrency import run_concurrently
from tests.factories.submissions import make_submission
from tests.submissions.conftest import add_file, create_submission
from tests.submissions.incoming import IncomingMaker

NFC_E = unicodedata.normalize("NFC", "é.py")
NFD_E = unicodedata.normalize("NFD", "é.py")
# (first name, second name): one name under the rule.
SAME_NAME = [
    pytest.param("É.py", "é.py", id="non-ascii-case"),
    pytest.param("STRASSE.py", "straße.py", id="sharp-s-folds-to-ss"),
    pytest.param(NFC_E, NFD_E, id="nfc-vs-nfd"),
    pytest.param("É.py", NFD_E, id="case-and-form"),
    pytest.param("Main.PY", "main.py", id="ascii-case"),
]
DIFFERENT = [
    pytest.param("e.py", "é.py", id="accent-is-not-case"),
    pytest.param("\u0131.py", "i.py", id="dotless-i-is-its-own-letter"),
]


def test_the_rule_is_nfc_of_the_case_fold() -> None:
    assert filename_fold("É.py") == filename_fold(NFD_E) == NFC_E
    assert filename_fold("Straße.PY") == "strasse.py"


@pytest.mark.django_db
@pytest.mark.parametrize(("first", "second"), SAME_NAME)
def test_sequential_uploads_of_one_folded_name_conflict(
    user: User, incoming: IncomingMaker, first: str, second: str
) -> None:
    submission = make_submission(owner=user, files=())
    submission_file_add(user=user, submission_id=submission.pk, upload=incoming(first, b"1"))

    with pytest.raises(DuplicateFilename) as caught:
        submission_file_add(user=user, submission_id=submission.pk, upload=incoming(second, b"2"))

    assert caught.value.code == "duplicate_filename"
    assert list(submission.files.values_list("filename", flat=True)) == [first]


@pytest.mark.django_db
@pytest.mark.parametrize(("first", "second"), SAME_NAME)
def test_resending_a_folded_name_with_the_same_content_is_a_safe_retry(
    user: User, incoming: IncomingMaker, first: str, second: str
) -> None:
    submission = make_submission(owner=user, files=())
    stored = submission_file_add(
        user=user, submission_id=submission.pk, upload=incoming(first, b"same")
    )

    again = submission_file_add(
        user=user, submission_id=submission.pk, upload=incoming(second, b"same")
    )

    assert again.created is False
    assert again.file.pk == stored.file.pk
    assert submission.files.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(("first", "second"), SAME_NAME)
def test_a_bulk_create_with_one_folded_name_twice_conflicts(
    user: User, incoming: IncomingMaker, first: str, second: str
) -> None:
    with pytest.raises(DuplicateFilename) as caught:
        submission_create(user=user, uploads=[incoming(first, b"1"), incoming(second, b"2")])

    assert caught.value.code == "duplicate_filename"
    assert not SubmissionFile.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(("first", "second"), DIFFERENT)
def test_different_letters_stay_different_names_on_every_path(
    user: User, incoming: IncomingMaker, first: str, second: str
) -> None:
    bulk = submission_create(user=user, uploads=[incoming(first, b"1"), incoming(second, b"2")])
    one_by_one = make_submission(owner=user, files=())
    for name in (first, second):
        submission_file_add(user=user, submission_id=one_by_one.pk, upload=incoming(name))

    assert bulk.files.count() == 2
    assert one_by_one.files.count() == 2


@pytest.mark.django_db
def test_the_database_constraint_holds_the_rule_without_the_services(user: User) -> None:
    submission = make_submission(owner=user, files=("É.py",))

    with pytest.raises(IntegrityError), transaction.atomic():
        SubmissionFile.objects.create(
            submission=submission, filename=NFD_E, size=1, sha256="0" * 64, storage_name="x"
        )

    assert submission.files.count() == 1


@pytest.mark.django_db(transaction=True)
def test_racing_uploads_of_case_variants_land_once(user: User, incoming: IncomingMaker) -> None:
    submission = make_submission(owner=user, files=())
    names = ["É.py", "é.py", NFD_E, "É.PY"] * 2

    outcomes = run_concurrently(
        lambda i: submission_file_add(
            user=user, submission_id=submission.pk, upload=incoming(names[i], f"{i}".encode())
        ),
        len(names),
    )

    created = [o for o in outcomes if o.ok and o.value.created]
    refused = [o.error for o in outcomes if not o.ok]
    assert len(created) == 1
    assert len(refused) == len(names) - 1
    assert all(isinstance(e, DuplicateFilename) for e in refused), refused
    assert submission.files.count() == 1


@pytest.mark.django_db
def test_the_api_answers_duplicate_filename_for_a_non_ascii_case_variant(
    user_client: APIClient,
) -> None:
    created = create_submission(user_client, files=[("É.py", b"1")])
    assert created.status_code == HTTPStatus.CREATED
    submission_id = created.json()["submission_id"]

    again = add_file(user_client, submission_id, "é.py", b"2")
    bulk = create_submission(user_client, files=[("É.py", b"1"), ("é.py", b"2")])

    assert again.status_code == HTTPStatus.BAD_REQUEST
    assert again.json()["code"] == "duplicate_filename"
    assert bulk.status_code == HTTPStatus.BAD_REQUEST
    assert bulk.json()["code"] == "duplicate_filename"
