"""`/api/schedules/` and `/api/schedule/tasks/`: webhook reservations at an absolute time."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from yoyaku_client import models
from yoyaku_client.endpoints.base import ApiBase
from yoyaku_client.record import Record
from yoyaku_client.transport import Safety

if TYPE_CHECKING:
    from yoyaku_client.models import Life, TaskRun


@dataclass(frozen=True, eq=False, repr=False)
class Action(Record):
    """What a schedule plan does at its time: a request to a path on the platform (runs as
    you) or to an allowed absolute URL."""

    path: str
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    connect_timeout: float | None = None
    request_timeout: float | None = None
    retry_count: int | None = None
    retry_interval: float | None = None

    def to_api(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path, "method": self.method.upper()}
        if self.headers:
            data["headers"] = dict(self.headers)
        if self.body is not None:
            data["body"] = self.body
        for name in ("connect_timeout", "request_timeout", "retry_count", "retry_interval"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        return data


def schedule_time(value: dt.datetime | str) -> str:
    """A datetime → ISO 8601 (an aware one keeps its offset); a string is sent as written
    (`YYYY-MM-DD HH:MM:SS` in the server's SCHEDULE_TIMEZONE, or ISO 8601)."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return value.strftime("%Y-%m-%d %H:%M:%S")
        return value.isoformat()
    return value


class SchedulesApi(ApiBase):
    """Lives (point and term bookings) and one-off tasks."""

    def book_schedule(self, booking: Mapping[str, Any]) -> Life:
        """`POST /api/schedules/` with the API's own body. A `life_uuid` is generated when
        missing: re-posting the same booking with it answers 200 with the same Life, so the
        request is safe to repeat."""
        body = dict(booking)
        body.setdefault("life_uuid", uuid.uuid4().hex)
        return models.Life.from_api(self._json("POST", "/schedules/", json=body))

    def book_point(
        self,
        *,
        at: dt.datetime | str,
        action: Action,
        resource_id: str = "",
        life_uuid: str | None = None,
    ) -> Life:
        """A point Life: `action` runs once at `at`."""
        body: dict[str, Any] = {
            "schedule_type": "point",
            "term": {"birth_time": schedule_time(at)},
            "birth": action.to_api(),
        }
        if resource_id:
            body["resource_id"] = resource_id
        if life_uuid:
            body["life_uuid"] = life_uuid
        return self.book_schedule(body)

    def book_term(
        self,
        *,
        birth_time: dt.datetime | str,
        death_time: dt.datetime | str,
        birth: Action,
        death: Action,
        resource_id: str = "",
        life_uuid: str | None = None,
    ) -> Life:
        """A term Life: `birth` runs at `birth_time`, `death` at `death_time`."""
        body: dict[str, Any] = {
            "schedule_type": "term",
            "term": {
                "birth_time": schedule_time(birth_time),
                "death_time": schedule_time(death_time),
            },
            "birth": birth.to_api(),
            "death": death.to_api(),
        }
        if resource_id:
            body["resource_id"] = resource_id
        if life_uuid:
            body["life_uuid"] = life_uuid
        return self.book_schedule(body)

    def list_schedules(
        self,
        *,
        state: str | None = None,
        resource_id: str | None = None,
        schedule_type: str | None = None,
    ) -> list[Life]:
        """`GET /api/schedules/`: your Lives."""
        params = {"state": state, "resource_id": resource_id, "schedule_type": schedule_type}
        return [models.Life.from_api(x) for x in self._json("GET", "/schedules/", params=params)]

    def get_schedule(self, life_uuid: str) -> Life:
        """`GET /api/schedules/{life_uuid}/`, with plans and every attempt."""
        return models.Life.from_api(self._json("GET", f"/schedules/{life_uuid}/"))

    def change_schedule(
        self,
        life_uuid: str,
        *,
        birth_time: dt.datetime | str | None = None,
        death_time: dt.datetime | str | None = None,
        changes: Mapping[str, Any] | None = None,
    ) -> Life:
        """`PATCH /api/schedules/{life_uuid}/`: new times (plans not yet started)."""
        body: dict[str, Any] = dict(changes or {})
        if birth_time is not None:
            body["birth_time"] = schedule_time(birth_time)
        if death_time is not None:
            body["death_time"] = schedule_time(death_time)
        return models.Life.from_api(self._json("PATCH", f"/schedules/{life_uuid}/", json=body))

    def cancel_schedule(self, life_uuid: str) -> Life:
        """`DELETE /api/schedules/{life_uuid}/`: before birth → Stillbirth; during a term the
        death action runs now."""
        return models.Life.from_api(self._json("DELETE", f"/schedules/{life_uuid}/"))

    def create_task(self, topic: str, content: Mapping[str, Any] | None = None) -> TaskRun:
        """`POST /api/schedule/tasks/`: run a task topic once on a worker. Not repeated after
        a lost answer (only a plan's call carries a key the server deduplicates on)."""
        body = {"topic": topic, "content": dict(content or {})}
        return models.TaskRun.from_api(
            self._json("POST", "/schedule/tasks/", json=body, safety=Safety.UNSAFE)
        )
