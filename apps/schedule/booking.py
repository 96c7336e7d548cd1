"""Turn a booking's input (tutorial wire format or flat names) into a validated `LifeSpec`.

Only the 400 `invalid_schedule` rules live here (shape, times, actions, target hosts, term
length); the time-dependent 406 and the 409 rules are the services' (they need `now` and locks).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings

from apps.core.validation import NUL_MESSAGE, contains_nul
from apps.schedule.exceptions import InvalidSchedule
from apps.schedule.models import ScheduleType
from apps.schedule.targets import TargetRefused, check_action_path, header_problem

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
ACTION_DEFAULTS: dict[str, Any] = {
    "headers": {},
    "body": None,
    "connect_timeout": 5.0,
    "request_timeout": 30.0,
    "retry_count": 0,
    "retry_interval": 1.0,
}


@dataclass(frozen=True)
class LifeSpec:
    schedule_type: str
    resource_id: str
    birth_time: dt.datetime
    death_time: dt.datetime | None
    birth_action: dict[str, Any]
    death_action: dict[str, Any] | None

    def fingerprint(self) -> str:
        """Equal for two bookings that mean the same thing (times compared as instants)."""
        canonical = {
            "schedule_type": self.schedule_type,
            "resource_id": self.resource_id,
            "birth_time": self.birth_time.astimezone(dt.UTC).isoformat(),
            "death_time": self.death_time.astimezone(dt.UTC).isoformat()
            if self.death_time
            else None,
            "birth_action": self.birth_action,
            "death_action": self.death_action,
        }
        blob = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    @property
    def end_time(self) -> dt.datetime:
        return self.death_time or self.birth_time


def schedule_timezone() -> ZoneInfo:
    return ZoneInfo(settings.SCHEDULE_TIMEZONE)


#: Times are kept a year inside `datetime`'s range, so the guard band, time zones and retries
#: never overflow (`9999-12-31 23:59:59` was a 500); earlier ones are still "too late" (406).
EARLIEST_TIME = dt.datetime(2, 1, 1, tzinfo=dt.UTC)
LATEST_TIME = dt.datetime(9998, 12, 31, tzinfo=dt.UTC)
OUT_OF_RANGE = "a time must lie between the years 2 and 9998"


def _in_range(moment: dt.datetime) -> dt.datetime:
    try:
        utc = moment.astimezone(dt.UTC)
    except OverflowError:
        raise ValueError(OUT_OF_RANGE) from None
    if not EARLIEST_TIME <= utc <= LATEST_TIME:
        raise ValueError(OUT_OF_RANGE)
    return moment


def parse_time(value: Any) -> dt.datetime:
    """`%Y-%m-%d %H:%M:%S` in SCHEDULE_TIMEZONE, or ISO 8601 with an offset, between
    `EARLIEST_TIME` and `LATEST_TIME`. Raises ValueError."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise ValueError("a time needs an offset")
        return _in_range(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a time string")
    text = value.strip()
    try:
        naive = dt.datetime.strptime(text, TIME_FORMAT)  # noqa: DTZ007 - zone applied below
    except ValueError:
        pass
    else:
        return _in_range(naive.replace(tzinfo=schedule_timezone()))
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(
            f"expected 'YYYY-MM-DD HH:MM:SS' ({settings.SCHEDULE_TIMEZONE}) "
            "or ISO 8601 with an offset"
        ) from exc
    if parsed.tzinfo is None:
        raise ValueError("an ISO 8601 time needs an offset (or use 'YYYY-MM-DD HH:MM:SS')")
    return _in_range(parsed)


def normalize_action(action: dict[str, Any], errors: list[str]) -> dict[str, Any]:
    """Fill defaults; refuse a target the platform may not call (`targets.check_action_path`:
    a relative path that is not an API route of the platform, an absolute URL whose host is
    not allowed). Appends to `errors`."""
    normalized = {**ACTION_DEFAULTS, **{k: v for k, v in action.items() if v is not None}}
    normalized["method"] = str(normalized["method"]).upper()
    normalized["headers"] = dict(normalized.get("headers") or {})
    normalized.setdefault("body", None)
    path = str(normalized["path"])
    if contains_nul(normalized):
        errors.append(NUL_MESSAGE)
    errors.extend(
        problem
        for name, value in normalized["headers"].items()
        if (problem := header_problem(str(name), str(value))) is not None
    )
    limit = float(settings.SCHEDULE_ACTION_MAX_SECONDS)
    for name in ("connect_timeout", "request_timeout"):
        value = normalized.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > limit:
            errors.append(f"{name} may be at most SCHEDULE_ACTION_MAX_SECONDS ({limit:g} s).")
    if not errors:
        try:
            check_action_path(path)
        except TargetRefused as exc:
            errors.append(str(exc))
    return normalized


def _pick(data: dict[str, Any], nested: str, key: str, flat: str) -> Any:
    group = data.get(nested) or {}
    value = group.get(key) if isinstance(group, dict) else None
    return value if value is not None else data.get(flat)


def life_spec_build(data: dict[str, Any]) -> LifeSpec:
    """Validate shapes already checked by the serializer into a LifeSpec.

    Raises InvalidSchedule (with `fields`) for a missing time or action, a bad time format, a
    refused action URL, `birth_time >= death_time`, a term shorter than MINIMUM_LIFE_TERM, or
    a term holding a `resource_id` longer than SCHEDULE_MAX_TERM.
    """
    fields: dict[str, list[str]] = {}
    schedule_type = data.get("schedule_type")
    if schedule_type not in ScheduleType.values:
        fields["schedule_type"] = ["Must be 'point' or 'term'."]

    times: dict[str, dt.datetime | None] = {}
    for name in ("birth_time", "death_time"):
        raw = _pick(data, "term", name, name)
        if raw is None:
            times[name] = None
            continue
        try:
            times[name] = parse_time(raw)
        except ValueError as exc:
            fields[name] = [str(exc)]
            times[name] = None
    if times["birth_time"] is None and "birth_time" not in fields:
        fields["birth_time"] = ["This time is required."]
    if schedule_type == ScheduleType.TERM and times["death_time"] is None:
        fields.setdefault("death_time", ["A term Life needs a death_time."])
    if schedule_type == ScheduleType.POINT and data_has(data, "term", "death_time"):
        fields["death_time"] = ["A point Life has no death_time."]

    actions: dict[str, dict[str, Any] | None] = {}
    for kind in ("birth", "death"):
        raw_action = data.get(kind) or data.get(f"{kind}_action")
        if raw_action is None:
            actions[kind] = None
            continue
        errors: list[str] = []
        actions[kind] = normalize_action(raw_action, errors)
        if errors:
            fields[f"{kind}_action"] = errors
    if actions["birth"] is None:
        fields.setdefault("birth_action", ["A birth action is required."])
    if schedule_type == ScheduleType.TERM and actions["death"] is None:
        fields.setdefault("death_action", ["A term Life needs a death action."])
    if schedule_type == ScheduleType.POINT and actions["death"] is not None:
        fields.setdefault("death_action", ["A point Life has no death action."])

    resource_id = str(data.get("resource_id") or "")
    birth, death = times["birth_time"], times["death_time"]
    if schedule_type == ScheduleType.TERM and birth is not None and death is not None:
        minimum = dt.timedelta(minutes=float(settings.MINIMUM_LIFE_TERM))
        if birth >= death:
            fields.setdefault("death_time", ["death_time must be after birth_time."])
        elif birth + minimum > death:
            fields.setdefault(
                "death_time",
                [f"A term must last at least MINIMUM_LIFE_TERM ({minimum.total_seconds():g} s)."],
            )
        elif resource_id and death - birth > max_term():
            fields.setdefault("death_time", [_max_term_message()])
    if fields:
        raise InvalidSchedule(_summary(fields), fields=fields)
    assert birth is not None  # noqa: S101 - guaranteed by the checks above
    assert actions["birth"] is not None  # noqa: S101
    return LifeSpec(
        schedule_type=str(schedule_type),
        resource_id=resource_id,
        birth_time=birth,
        death_time=death if schedule_type == ScheduleType.TERM else None,
        birth_action=actions["birth"],
        death_action=actions["death"] if schedule_type == ScheduleType.TERM else None,
    )


def max_term() -> dt.timedelta:
    """The longest span (birth to death) of a Life that holds a `resource_id`."""
    return dt.timedelta(days=float(settings.SCHEDULE_MAX_TERM))


def _max_term_message() -> str:
    return (
        f"A Life holding a resource_id may span at most SCHEDULE_MAX_TERM "
        f"({float(settings.SCHEDULE_MAX_TERM):g} days) from birth_time to death_time; "
        "book the rest as another Life later."
    )


def data_has(data: dict[str, Any], nested: str, key: str) -> bool:
    return _pick(data, nested, key, key) is not None


def _summary(fields: dict[str, list[str]]) -> str:
    return "; ".join(f"{name}: {msgs[0]}" for name, msgs in fields.items())
