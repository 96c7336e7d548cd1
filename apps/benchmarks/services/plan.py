"""The plan of a bundle: what applying it would create, update, delete or leave unchanged.

Both sides are flattened to the same leaves (`phases.<slug>.limits.per_day`), phases named by
slug: the stored challenge read back (`config_from_challenge`) and the bundle's desired state.
A new phase is one `create` op, a removed one one `delete` op; within a phase that stays, each
leaf is its own op.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from apps.benchmarks.models import Challenge
from apps.benchmarks.services.config import ChallengeConfig, MetricConfig, PhaseConfig


@dataclass(frozen=True)
class PlanOp:
    op: str  # create | update | delete | unchanged
    path: str
    before: Any
    after: Any

    def as_dict(self) -> dict[str, Any]:
        return {"op": self.op, "path": self.path, "from": self.before, "to": self.after}


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def phase_leaves(phase: PhaseConfig, order: int) -> dict[str, Any]:
    return {
        "order": order,
        "title": phase.title,
        "start": _iso(phase.start),
        "end": _iso(phase.end),
        "kind": phase.kind,
        "input_data": phase.input_data or None,
        "public_data": phase.public_data or None,
        "reference_data": phase.reference_data,
        "scoring_program": phase.scoring_program,
        "scoring_entrypoint": phase.scoring_entrypoint,
        **{f"{name}_digest": value or None for name, value in sorted(phase.digests.items())},
        "metrics": [
            {"key": m.key, "label": m.label, "direction": m.direction, "precision": m.precision}
            for m in phase.metrics
        ],
        "primary": phase.primary,
        "splits": list(phase.splits),
        "reveal": _iso(phase.reveal_at) if phase.reveal == "time" else phase.reveal,
        "final_selection": phase.final_selection,
        "file_types": list(phase.file_types),
        **{f"limits.{key}": phase.limits.get(key) for key in ("per_day", "total", "concurrent")},
        **{f"resources.{key}": phase.resources.get(key) for key in ("timeout", "memory_mb")},
        "baselines": [{"folder": folder, "digest": digest} for folder, digest in phase.baselines],
    }


def challenge_leaves(config: ChallengeConfig) -> dict[str, Any]:
    return {
        "title": config.title,
        "description": config.description_source,
        "visibility": config.visibility,
        "participation": config.participation,
        "max_team_size": config.max_team_size,
        "hosts": sorted(config.hosts),
    }


def config_from_challenge(challenge: Challenge) -> ChallengeConfig:
    """The stored challenge in the form a bundle describes."""
    phases = [
        PhaseConfig(
            slug=p.slug,
            title=p.title,
            start=p.start,
            end=p.end,
            kind=p.kind,
            input_data=p.input_data,
            public_data=p.public_data,
            reference_data=p.reference_data,
            scoring_program=p.scoring_program,
            scoring_entrypoint=p.scoring_entrypoint,
            digests={
                "input_data": p.input_data_digest,
                "public_data": p.public_data_digest,
                "reference_data": p.reference_data_digest,
                "scoring_program": p.scoring_program_digest,
            },
            metrics=[
                MetricConfig(m.key, m.label, m.direction, m.precision)
                for m in p.metrics.order_by("order")
            ],
            primary=p.primary_metric,
            splits=list(p.splits.order_by("order").values_list("name", flat=True)),
            reveal=p.reveal,
            reveal_at=p.reveal_at,
            final_selection=p.final_selection,
            file_types=list(p.file_types),
            limits={
                "per_day": p.limit_per_day,
                "total": p.limit_total,
                "concurrent": p.limit_concurrent,
            },
            resources={"timeout": p.timeout_seconds, "memory_mb": p.memory_mb},
            baselines=[(b.folder, b.digest) for b in p.baselines.order_by("order")],
        )
        for p in challenge.phases.order_by("order")
    ]
    return ChallengeConfig(
        slug=challenge.slug,
        title=challenge.title,
        description_source=challenge.description_source,
        description_html=challenge.description_html,
        visibility=challenge.visibility,
        participation=challenge.participation,
        max_team_size=challenge.max_team_size,
        hosts=sorted(challenge.hosts.values_list("user__username", flat=True)),
        phases=phases,
    )


def _compare(prefix: str, before: dict[str, Any], after: dict[str, Any]) -> list[PlanOp]:
    ops = []
    for key in [*after, *(k for k in before if k not in after)]:
        path = f"{prefix}{key}"
        if key not in before:
            ops.append(PlanOp("create", path, None, after[key]))
        elif key not in after:
            ops.append(PlanOp("delete", path, before[key], None))
        elif before[key] != after[key]:
            ops.append(PlanOp("update", path, before[key], after[key]))
        else:
            ops.append(PlanOp("unchanged", path, before[key], after[key]))
    return ops


def bundle_plan(current: ChallengeConfig | None, desired: ChallengeConfig) -> list[PlanOp]:
    """The ops that take `current` (None: no challenge yet) to `desired`."""
    ops = _compare("", challenge_leaves(current) if current else {}, challenge_leaves(desired))
    old = {p.slug: (i, p) for i, p in enumerate(current.phases)} if current else {}
    new = {p.slug: (i, p) for i, p in enumerate(desired.phases)}
    for slug, (order, phase) in new.items():
        if slug not in old:
            ops.append(PlanOp("create", f"phases.{slug}", None, phase_leaves(phase, order)))
            continue
        before = phase_leaves(old[slug][1], old[slug][0])
        ops.extend(_compare(f"phases.{slug}.", before, phase_leaves(phase, order)))
    for slug, (order, phase) in old.items():
        if slug not in new:
            ops.append(PlanOp("delete", f"phases.{slug}", phase_leaves(phase, order), None))
    return ops


def plan_changes(ops: list[PlanOp]) -> bool:
    return any(op.op != "unchanged" for op in ops)
