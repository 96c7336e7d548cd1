"""POST /api/jobs/ reads a plain body and writes its answer without building a serializer:
both must give exactly what the serializers give (the schema documents the serializers)."""

from __future__ import annotations

from typing import Any

import pytest

from apps.jobs.api.serializers import (
    JobReplayOutputSerializer,
    JobSubmitInputSerializer,
    JobSubmitOutputSerializer,
    submit_input_plain,
    submit_output,
)
from apps.jobs.models import Job, JobStatus
from apps.jobs.services import SubmitResult

_BODIES: list[Any] = [
    {"submission_id": "s1"},
    {"submission_id": "s" * 64},
    {"submission_id": "s" * 65},
    {"submission_id": ""},
    {"submission_id": " s1"},
    {"submission_id": "s1 "},
    {"submission_id": "   "},
    {"submission_id": "s\x001"},
    {"submission_id": "s\u00e91"},
    {"submission_id": 12},
    {"submission_id": 1.5},
    {"submission_id": True},
    {"submission_id": None},
    {"submission_id": ["s1"]},
    {},
    [],
    "s1",
    None,
    {"submission_id": "s1", "unknown": 1},
    {"submission_id": "s1", "config": None},
    {"submission_id": "s1", "config": {}},
    {"submission_id": "s1", "config": {"resource_class": "gpu", "n": [1, {"a": None}]}},
    {"submission_id": "s1", "config": []},
    {"submission_id": "s1", "config": "x"},
    {"submission_id": "s1", "config": 3},
    {"submission_id": "s1", "idempotency_key": "k-1"},
    {"submission_id": "s1", "idempotency_key": ""},
    {"submission_id": "s1", "idempotency_key": " k "},
    {"submission_id": "s1", "idempotency_key": "k\x00"},
    {"submission_id": "s1", "idempotency_key": "k" * 300},
    {"submission_id": "s1", "idempotency_key": None},
    {"submission_id": "s1", "idempotency_key": 7},
    {"submission_id": "s1", "idempotency_key": "\u00e9"},
    {"submission_id": "s1", "idempotency_ttl_hours": 1},
    {"submission_id": "s1", "idempotency_ttl_hours": 168},
    {"submission_id": "s1", "idempotency_ttl_hours": 0},
    {"submission_id": "s1", "idempotency_ttl_hours": 169},
    {"submission_id": "s1", "idempotency_ttl_hours": "5"},
    {"submission_id": "s1", "idempotency_ttl_hours": 5.0},
    {"submission_id": "s1", "idempotency_ttl_hours": True},
    {"submission_id": "s1", "idempotency_ttl_hours": None},
    {"submission_id": "s1", "reservation_id": None},
    {"submission_id": "s1", "reservation_id": ""},
    {"submission_id": "s1", "reservation_id": "r1"},
    {"submission_id": "s1", "reservation_id": " r1"},
    {"submission_id": "s1", "reservation_id": "r" * 65},
    {"submission_id": "s1", "reservation_id": 4},
    {
        "submission_id": "s1",
        "config": {"resource_class": "cpu"},
        "idempotency_key": "k-2",
        "idempotency_ttl_hours": 24,
        "reservation_id": "r2",
    },
]


@pytest.mark.parametrize("body", _BODIES)
def test_a_plain_body_validates_to_what_the_serializer_gives(body: Any) -> None:
    serializer = JobSubmitInputSerializer(data=body)
    valid = serializer.is_valid()
    plain = submit_input_plain(body)
    if plain is None:
        return  # the view validates it with the serializer
    assert valid, (body, serializer.errors)
    assert plain == dict(serializer.validated_data)
    for name, value in plain.items():
        assert type(value) is type(serializer.validated_data[name])


def test_the_usual_bodies_take_the_plain_path() -> None:
    assert submit_input_plain({"submission_id": "s1", "idempotency_key": "k-s1"}) is not None
    assert submit_input_plain({"submission_id": "s1", "config": {"a": 1}}) is not None


@pytest.mark.parametrize("created", [True, False])
@pytest.mark.parametrize("warning", [None, "cost limit at 80 %"])
def test_the_answer_is_what_the_output_serializers_render(
    created: bool, warning: str | None
) -> None:
    job = Job(id="j1", status=JobStatus.QUEUED)
    result = SubmitResult(
        job=job,
        created=created,
        quota_warnings=["concurrent jobs at 80 %"] if created else [],
        cost_limit_warning=warning if created else None,
    )
    serializer = JobSubmitOutputSerializer if created else JobReplayOutputSerializer
    expected = serializer(result).data
    answer = submit_output(result)
    assert list(answer.items()) == list(expected.items())
