"""A bundle's desired state: `challenge.yaml` checked by the schema, then by the rules a schema
cannot state (each refusal keyed by its YAML path, all of them reported at once).

Cross-field rules: slugs, metric keys, splits and baselines unique; `primary` names a metric;
every folder and file the YAML names exists in the zip (and no path leaves it); `end` after
`start`, times with an offset, `reveal: end` needs an `end`; `resources` within the
`GRADING_*` maxima; every host an existing user.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import markdown_it
import nh3
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils.dateparse import parse_datetime

from apps.benchmarks.exceptions import InvalidBundle
from apps.benchmarks.services.bundle_archive import MANIFEST, BundleArchive, folder_normalize
from apps.benchmarks.services.manifest import (
    DEFAULT_FILE_TYPES,
    MAX_DESCRIPTION_BYTES,
    MAX_MANIFEST_BYTES,
    manifest_load,
    manifest_too_large,
    manifest_validate,
)
from apps.core.archives import member_problem


@dataclass(frozen=True)
class MetricConfig:
    key: str
    label: str
    direction: str
    precision: int


@dataclass(frozen=True)
class PhaseConfig:
    slug: str
    title: str
    start: dt.datetime
    end: dt.datetime | None
    kind: str
    input_data: str
    public_data: str
    reference_data: str
    scoring_program: str
    scoring_entrypoint: str
    digests: dict[str, str]
    metrics: list[MetricConfig]
    primary: str
    splits: list[str]
    reveal: str
    reveal_at: dt.datetime | None
    final_selection: int
    file_types: list[str]
    limits: dict[str, int | None]
    resources: dict[str, int | None]
    baselines: list[tuple[str, str]]  # (folder, digest)


@dataclass(frozen=True)
class ChallengeConfig:
    slug: str
    title: str
    description_source: str
    description_html: str
    visibility: str
    participation: str
    max_team_size: int
    hosts: list[str]
    phases: list[PhaseConfig] = field(default_factory=list)


def description_render(source: str) -> str:
    """Markdown to HTML with raw HTML disabled, then cleaned by nh3 (links get rel=noopener)."""
    rendered = markdown_it.MarkdownIt("commonmark", {"html": False}).render(source)
    return nh3.clean(rendered)


class _Errors:
    def __init__(self) -> None:
        self.fields: dict[str, list[str]] = {}

    def add(self, path: str, message: str) -> None:
        self.fields.setdefault(path, []).append(message)


def _time(raw: Any, path: str, errors: _Errors) -> dt.datetime | None:
    parsed = parse_datetime(raw) if isinstance(raw, str) else None
    if parsed is None:
        errors.add(path, "must be an ISO 8601 time, e.g. 2026-12-01T00:00:00Z")
        return None
    if parsed.tzinfo is None:
        errors.add(path, "must have a UTC offset (Z or +hh:mm)")
        return None
    return parsed.astimezone(dt.UTC)


def _folder(archive: BundleArchive, raw: str | None, path: str, errors: _Errors) -> str:
    if raw is None:
        return ""
    problem = member_problem(raw)
    folder = folder_normalize(raw)
    if problem is not None or not folder:
        errors.add(path, "must be a relative folder inside the bundle")
        return ""
    if not archive.has_folder(folder):
        errors.add(path, f"no folder {folder} in the bundle")
    return folder


def _phase(archive: BundleArchive, raw: dict[str, Any], at: str, errors: _Errors) -> PhaseConfig:
    start = _time(raw["start"], f"{at}.start", errors)
    end = None if raw.get("end") is None else _time(raw["end"], f"{at}.end", errors)
    if start and end and end <= start:
        errors.add(f"{at}.end", "must be after start")
    folders = {
        name: _folder(archive, raw.get(name), f"{at}.{name}", errors)
        for name in ("input_data", "public_data", "reference_data", "scoring_program")
    }
    entrypoint = str(raw["scoring_entrypoint"])
    if folders["scoring_program"]:
        if member_problem(entrypoint) is not None:
            errors.add(f"{at}.scoring_entrypoint", "must be a relative path inside the folder")
        elif not archive.is_file(folders["scoring_program"] + entrypoint.strip("/")):
            errors.add(
                f"{at}.scoring_entrypoint",
                f"no file {entrypoint} in {folders['scoring_program']}",
            )
    metrics = [
        MetricConfig(
            key=m["key"],
            label=m.get("label", m["key"]),
            direction=m["direction"],
            precision=int(m.get("precision", 4)),
        )
        for m in raw["metrics"]
    ]
    seen: set[str] = set()
    for index, metric in enumerate(metrics):
        if metric.key in seen:
            errors.add(f"{at}.metrics[{index}].key", f"{metric.key} is named twice")
        seen.add(metric.key)
    if raw["primary"] not in seen:
        errors.add(f"{at}.primary", "must name one of the phase's metrics")
    splits = list(raw["splits"])
    for index, split in enumerate(splits):
        if split in splits[:index]:
            errors.add(f"{at}.splits[{index}]", f"{split} is named twice")
    reveal_raw = str(raw.get("reveal", "end"))
    reveal, reveal_at = reveal_raw, None
    if reveal_raw not in ("end", "never"):
        reveal, reveal_at = "time", _time(reveal_raw, f"{at}.reveal", errors)
    elif reveal_raw == "end" and end is None and any(s != "public" for s in splits):
        errors.add(f"{at}.reveal", "is end, but the phase has no end: give a time or never")
    resources = {"timeout": None, "memory_mb": None, **raw.get("resources", {})}
    if resources["timeout"] is not None and resources["timeout"] > float(settings.GRADING_TIMEOUT):
        errors.add(
            f"{at}.resources.timeout",
            f"must be at most {settings.GRADING_TIMEOUT} (GRADING_TIMEOUT)",
        )
    memory_max = int(settings.GRADING_MEMORY_LIMIT) // (1024 * 1024)
    if resources["memory_mb"] is not None and resources["memory_mb"] > memory_max:
        errors.add(
            f"{at}.resources.memory_mb", f"must be at most {memory_max} (GRADING_MEMORY_LIMIT)"
        )
    baselines: list[tuple[str, str]] = []
    for index, folder_raw in enumerate(raw.get("baselines", [])):
        folder = _folder(archive, folder_raw, f"{at}.baselines[{index}]", errors)
        if folder and folder in [b for b, _ in baselines]:
            errors.add(f"{at}.baselines[{index}]", f"{folder} is named twice")
        elif folder:
            baselines.append((folder, archive.folder_digest(folder)))
    return PhaseConfig(
        slug=raw["slug"],
        title=raw["title"],
        start=start or dt.datetime.min.replace(tzinfo=dt.UTC),
        end=end,
        kind=raw["kind"],
        input_data=folders["input_data"],
        public_data=folders["public_data"],
        reference_data=folders["reference_data"],
        scoring_program=folders["scoring_program"],
        scoring_entrypoint=entrypoint.strip("/"),
        digests={
            name: archive.folder_digest(folder) if folder else ""
            for name, folder in folders.items()
        },
        metrics=metrics,
        primary=raw["primary"],
        splits=splits,
        reveal=reveal,
        reveal_at=reveal_at,
        final_selection=int(raw.get("final_selection", 0)),
        file_types=list(raw.get("file_types", DEFAULT_FILE_TYPES)),
        limits={"per_day": None, "total": None, "concurrent": None, **raw.get("limits", {})},
        resources=resources,
        baselines=baselines,
    )


def _manifest_bytes(archive: BundleArchive) -> bytes:
    """challenge.yaml's bytes. A member declaring more than `MAX_MANIFEST_BYTES` is refused
    unread: a few MiB of zip can inflate to a GiB, which the web process would hold."""
    if archive.is_file(MANIFEST) and archive.members[MANIFEST].size > MAX_MANIFEST_BYTES:
        raise manifest_too_large()
    return archive.read(MANIFEST, max_bytes=MAX_MANIFEST_BYTES, field="challenge.yaml")


def _overlap(a: str, b: str) -> bool:
    """Two normalized folders ("x/y/") of which one holds the other (or they are one)."""
    return bool(a and b) and (a.startswith(b) or b.startswith(a))


def _secret_folders_apart(phases: list[PhaseConfig], description: Any, errors: _Errors) -> None:
    """What participants read (every phase's public data, the input data a code phase's
    program reads at /data, the description) never holds, or sits inside, any phase's
    reference data or scoring program: one bundle line must not hand them out."""
    secrets = [
        (f"phases[{j}].{name}", getattr(phase, name))
        for j, phase in enumerate(phases)
        for name in ("reference_data", "scoring_program")
    ]
    for i, phase in enumerate(phases):
        for name in ("public_data", "input_data"):
            for where, secret in secrets:
                if _overlap(getattr(phase, name), secret):
                    errors.add(
                        f"phases[{i}].{name}",
                        f"must be apart from the folder of {where} ({secret}): participants "
                        "read this folder",
                    )
    if isinstance(description, str):
        name = folder_normalize(description).rstrip("/")
        for where, secret in secrets:
            if secret and name.startswith(secret):
                errors.add("description", f"must not be inside {where} ({secret})")


def bundle_config(archive: BundleArchive, *, uploader: str) -> ChallengeConfig:
    """The challenge `archive` describes; InvalidBundle with every problem by YAML path."""
    document = manifest_load(_manifest_bytes(archive))
    if not isinstance(document, dict):
        raise InvalidBundle(
            "challenge.yaml must be a mapping.", fields={"challenge.yaml": ["must be a mapping"]}
        )
    manifest_validate(document)
    errors = _Errors()
    description = ""
    if "description" in document:
        name = folder_normalize(document["description"]).rstrip("/")
        if member_problem(document["description"]) is not None or not archive.is_file(name):
            errors.add("description", f"no file {document['description']} in the bundle")
        else:
            data = archive.read(name, max_bytes=MAX_DESCRIPTION_BYTES, field="description")
            try:
                description = data.decode("utf-8")
            except UnicodeDecodeError:
                errors.add("description", "must be UTF-8 text")
    phases: list[PhaseConfig] = []
    for index, raw in enumerate(document["phases"]):
        phase = _phase(archive, raw, f"phases[{index}]", errors)
        if phase.slug in [p.slug for p in phases]:
            errors.add(f"phases[{index}].slug", f"{phase.slug} is named twice")
        phases.append(phase)
    _secret_folders_apart(phases, document.get("description"), errors)
    hosts = sorted({*document.get("hosts", []), uploader})
    known = set(
        get_user_model().objects.filter(username__in=hosts).values_list("username", flat=True)
    )
    for index, name in enumerate(document.get("hosts", [])):
        if name not in known:
            errors.add(f"hosts[{index}]", f"no user named {name}")
    if errors.fields:
        raise InvalidBundle("The bundle breaks the challenge rules.", fields=errors.fields)
    return ChallengeConfig(
        slug=document["slug"],
        title=document["title"],
        description_source=description,
        description_html=description_render(description),
        visibility=document.get("visibility", "public"),
        participation=document.get("participation", "open"),
        max_team_size=int(document.get("max_team_size", 1)),
        hosts=hosts,
        phases=phases,
    )
