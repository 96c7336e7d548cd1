"""How the SDK's dataclasses read the API's answers: missing fields take their defaults, None
reads as missing, unknown fields are ignored, nested models and datetimes are converted.

Besides the named cases below, every model reads a set of generated answers (empty, all null,
typical, numbers and booleans as strings, nested empties, unknown fields) exactly as the
hand-written readers did before they were generated from the fields: `models_snapshot.json`
was written by those readers (`python -m tests.client.test_models` rewrites it).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from yoyaku_client import models
from yoyaku_client.decode import ApiModel
from yoyaku_client.files import ArchiveMember, GradingAttempt, ReviewDetail, StoredFile
from yoyaku_client.models import (
    FileInfo,
    Job,
    JobSubmission,
    LeaderboardRow,
    Life,
    Me,
    ReviewQueueEntry,
    Submission,
    to_jsonable,
)

SNAPSHOT = Path(__file__).with_name("models_snapshot.json")

MODELS: list[Any] = [
    models.User,
    models.Me,
    models.FileInfo,
    models.UploadedFile,
    models.Submission,
    models.JobSubmission,
    models.Job,
    models.JobLogs,
    models.Quota,
    models.Reservation,
    models.ApiToken,
    models.LeaderboardRow,
    models.LeaderboardQuestion,
    models.ReviewQueueEntry,
    models.Claim,
    models.ClaimRelease,
    models.ReviewRecord,
    models.ReviewOutcome,
    models.Regrade,
    models.PlanAttempt,
    models.Plan,
    models.Life,
    models.TaskRun,
    ArchiveMember,
    StoredFile,
    GradingAttempt,
    ReviewDetail,
]

# Values by the field's declared type, in the API's own shapes and in looser ones.
_TYPICAL: dict[str, Any] = {
    "str": "Ab1",
    "int": 7,
    "float": 0.5,
    "bool": True,
    "float | None": 0.25,
    "int | None": 3,
    "str | None": "text",
    "dt.datetime | None": "2030-01-15T09:00:00+09:00",
    "list[str]": ["a", "b"],
    "dict[str, Any]": {"k": 1},
    "dict[str, Any] | None": {"method": "POST"},
    "User": {"id": 4, "username": "alice", "is_staff": True},
    "User | None": {"id": 5, "username": "bob"},
}
_LOOSE: dict[str, Any] = {
    "str": 12,
    "int": "9",
    "float": "0.75",
    "bool": "yes",
    "float | None": "1",
    "int | None": "404",
    "str | None": "",
    "dt.datetime | None": "2030-01-15T09:00:00Z",
    "list[str]": [1, 2.5, None],
    "dict[str, Any]": ["not", "a", "mapping"],
    "dict[str, Any] | None": "not a mapping",
    "User": {},
    "User | None": "not a mapping",
}
_NESTED_TYPICAL: dict[str, Any] = {
    "list[": [{"number": 1, "filename": "a.py", "size": 2}],
    "": {"score": 1},
}
_NESTED_EMPTY: dict[str, Any] = {"list[": [{}], "": {}}


def _value(type_name: str, table: dict[str, Any], nested: dict[str, Any]) -> Any:
    if type_name in table:
        return table[type_name]
    if type_name.startswith("list["):
        return nested["list["]
    return nested[""]


def _falsy(type_name: str) -> Any:
    for start, value in (("list", []), ("dict", {}), ("str", ""), ("dt.", ""), ("bool", False)):
        if type_name.startswith(start):
            return value
    return 0 if type_name[0].islower() else {}


def _keys(model: Any) -> list[str]:
    names = [f.name for f in dataclasses.fields(model)]
    return [*names, "id"] if "id" not in names else names


def _answers(model: Any) -> dict[str, dict[str, Any]]:
    fields = {f.name: str(f.type) for f in dataclasses.fields(model)}
    fields.setdefault("id", "str")  # ReviewQueueEntry reads its submission_id from "id"

    def build(table: dict[str, Any], nested: dict[str, Any]) -> dict[str, Any]:
        return {name: _value(kind, table, nested) for name, kind in fields.items()}

    return {
        "empty": {},
        "null": dict.fromkeys(_keys(model)),
        "typical": build(_TYPICAL, _NESTED_TYPICAL),
        "loose": build(_LOOSE, _NESTED_EMPTY),
        "extra": {**build(_TYPICAL, _NESTED_TYPICAL), "added_later": [1], "sha": "X"},
        "falsy": {name: _falsy(kind) for name, kind in fields.items()},
    }


def _read(model: Any, answer: dict[str, Any]) -> Any:
    if model is models.JobSubmission:
        return model.from_api(answer, key="k", attempts=2)
    return model.from_api(answer)


def readings() -> dict[str, Any]:
    """Each model's reading of each generated answer, as `--json` would print it (or the
    exception it raised)."""
    found: dict[str, Any] = {}
    for model in MODELS:
        for case, answer in _answers(model).items():
            try:
                value = to_jsonable(_read(model, answer))
            except (TypeError, ValueError, AttributeError) as exc:
                value = {"raised": type(exc).__name__}
            found[f"{model.__name__} {case}"] = value
    return found


EXPECTED: dict[str, Any] = json.loads(SNAPSHOT.read_text()) if SNAPSHOT.exists() else {}


@pytest.mark.parametrize("reading", sorted(EXPECTED))
def test_model_reads_the_answer_as_the_hand_written_reader_did(reading: str) -> None:
    assert json.loads(json.dumps(readings()[reading])) == EXPECTED[reading]


def test_the_snapshot_covers_every_model_and_case() -> None:
    assert sorted(readings()) == sorted(EXPECTED)


def test_missing_fields_take_their_defaults() -> None:
    submission = Submission.from_api({})
    assert (submission.submission_id, submission.user_id, submission.score) == ("", 0, None)
    assert (submission.entrypoint, submission.config_file) == ("main.py", "config.yaml")
    assert (submission.metadata, submission.files, submission.created_at) == ({}, [], None)
    row = LeaderboardRow.from_api({})
    assert (row.rank, row.score, row.user.username) == (0, 0.0, "")


def test_null_fields_read_as_missing() -> None:
    job = Job.from_api(dict.fromkeys(["job_id", "cost", "config", "error", "started_at"]))
    assert (job.job_id, job.cost, job.config, job.error, job.started_at) == ("", None, {}, "", None)
    entry = ReviewQueueEntry.from_api({"id": "abc", "owner": None, "claimed_by": None})
    assert (entry.submission_id, entry.owner, entry.claimed_by) == ("abc", None, None)


def test_unknown_fields_are_ignored_and_known_ones_converted() -> None:
    me = Me.from_api({"id": "3", "username": "ann", "is_staff": 1, "new_field": {"x": 1}})
    assert me == Me(id=3, username="ann", is_staff=True, is_reviewer=False)
    info = FileInfo.from_api({"sha256": "ABCDEF", "uploaded_at": "2030-01-01T00:00:00Z"})
    assert info.sha256 == "abcdef"
    assert info.uploaded_at == dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


def test_nested_models_are_read_with_their_own_rules() -> None:
    life = Life.from_api(
        {
            "plans": [{"kind": "birth", "attempts": [{"number": "2", "status_code": "500"}]}],
            "birth_action": {"path": "/x"},
            "death_action": "no",
        }
    )
    assert life.plans[0].attempts[0].number == 2
    assert life.plans[0].attempts[0].status_code == 500
    assert (life.birth_action, life.death_action, life.owner) == ({"path": "/x"}, None, None)
    stored = StoredFile.from_api({"members": [{"name": "a"}, "junk"], "text": 5})
    assert stored.members == [ArchiveMember(name="a", size=0, type="")]
    assert stored.text is None
    assert StoredFile.from_api({"members": "junk"}).members is None
    attempt = GradingAttempt.from_api({"exit_code": "1"})
    assert attempt.exit_code is None


def test_job_submission_keeps_the_key_and_attempts_the_client_knows() -> None:
    answer = {"job_id": "j", "idempotent_hit": 1, "cost_limit_warning": "", "quota_warnings": None}
    job = JobSubmission.from_api(answer, key="key-1", attempts=3)
    assert (job.idempotency_key, job.attempts, job.idempotent_hit) == ("key-1", 3, True)
    assert (job.cost_limit_warning, job.quota_warnings) == (None, [])


@dataclasses.dataclass(frozen=True)
class _Unreadable(ApiModel):
    tags: set[str]


def test_a_field_of_a_type_without_a_rule_is_named_on_the_first_reading() -> None:
    with pytest.raises(TypeError, match=r"_Unreadable\.tags: no reading rule"):
        _Unreadable.from_api({"tags": ["a"]})


if __name__ == "__main__":
    SNAPSHOT.write_text(json.dumps(readings(), indent=1, sort_keys=True) + "\n")
