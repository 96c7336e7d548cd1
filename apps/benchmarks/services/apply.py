"""Applying a bundle (SPEC §11.1): create or change a challenge whole, or not at all.

Order of work: the zip is checked and the YAML validated (no lock, no storage); the bundle is
written to storage under a fresh key; then one transaction locks the challenge row (by slug),
decides again who may apply, and writes every row. Whatever fails after the storage write
removes the stored file; the replaced bundle's file is removed after commit.

Two applies of one slug race safely: on the challenge row's lock when it exists, and on the
unique slug when both create (the loser retries once as an update), so versions go 1, 2, ...
without a gap or a duplicate.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.files import File
from django.core.files.storage import storages
from django.db import IntegrityError, transaction

from apps.benchmarks.models import (
    Baseline,
    Challenge,
    ChallengeHost,
    Metric,
    Phase,
    ScoringVersion,
    Split,
)
from apps.benchmarks.selectors import challenge_get, challenge_may_manage
from apps.benchmarks.services.bundle_archive import BundleArchive
from apps.benchmarks.services.config import ChallengeConfig, PhaseConfig, bundle_config
from apps.benchmarks.services.plan import PlanOp, bundle_plan, config_from_challenge, plan_changes
from apps.benchmarks.services.rescores import rescore_begin
from apps.benchmarks.services.reveal import challenge_reveals_sync
from apps.benchmarks.services.scoring import baselines_score_enqueue
from apps.core.exceptions import PermissionDenied
from apps.core.models_utils import new_hex_id
from apps.core.permissions import user_has_permission

logger = logging.getLogger(__name__)

ADD_PERMISSION = "benchmarks.add_challenge"
BUNDLE_PREFIX = "bundles"
_CREATE_ATTEMPTS = 3


@dataclass(frozen=True)
class ApplyResult:
    slug: str
    plan: list[PlanOp]
    challenge: Challenge | None  # None for a dry run
    created: bool
    dry_run: bool


def _may_apply(*, user: AbstractBaseUser, challenge: Challenge | None) -> None:
    if challenge is None:
        if not user_has_permission(user, ADD_PERMISSION):
            raise PermissionDenied(f"Creating a challenge needs the permission {ADD_PERMISSION}.")
    elif not challenge_may_manage(challenge=challenge, user=user):
        raise PermissionDenied("Only the challenge's hosts (and staff) may change it.")


def _stored_delete(name: str) -> None:
    try:
        storages["default"].delete(name)
    except Exception:
        logger.exception("Could not delete stored bundle %s", name)


def _phase_write(challenge: Challenge, config: PhaseConfig, order: int) -> None:
    values = {
        "title": config.title,
        "order": order,
        "start": config.start,
        "end": config.end,
        "kind": config.kind,
        "input_data": config.input_data,
        "public_data": config.public_data,
        "reference_data": config.reference_data,
        "scoring_program": config.scoring_program,
        "scoring_entrypoint": config.scoring_entrypoint,
        "input_data_digest": config.digests["input_data"],
        "public_data_digest": config.digests["public_data"],
        "reference_data_digest": config.digests["reference_data"],
        "scoring_program_digest": config.digests["scoring_program"],
        "primary_metric": config.primary,
        "reveal": config.reveal,
        "reveal_at": config.reveal_at,
        "final_selection": config.final_selection,
        "file_types": config.file_types,
        "limit_per_day": config.limits.get("per_day"),
        "limit_total": config.limits.get("total"),
        "limit_concurrent": config.limits.get("concurrent"),
        "timeout_seconds": config.resources.get("timeout"),
        "memory_mb": config.resources.get("memory_mb"),
    }
    phase, _ = Phase.objects.update_or_create(
        challenge=challenge, slug=config.slug, defaults=values
    )
    new_version = _scoring_version_keep(phase, config, challenge.bundle_file)
    phase.metrics.all().delete()
    phase.splits.all().delete()
    Metric.objects.bulk_create(
        Metric(
            phase=phase,
            key=m.key,
            label=m.label,
            direction=m.direction,
            precision=m.precision,
            order=i,
        )
        for i, m in enumerate(config.metrics)
    )
    Split.objects.bulk_create(
        Split(phase=phase, name=name, hidden=name != "public", order=i)
        for i, name in enumerate(config.splits)
    )
    _baselines_write(phase, config)
    if new_version:
        # Every counted, completed entry and every baseline is scored in it (§11.6); the
        # leaderboard keeps serving the current version until they all are.
        rescore_begin(phase=phase, version=new_version)


def _scoring_version_keep(phase: Phase, config: PhaseConfig, bundle_file: str) -> int:
    """Version 1 for a new phase; version n+1 when the scoring program or the reference data
    changed by digest (§11.6). Any other change keeps the version. Returns the number of a
    version that needs a rescore (n+1 of an existing phase), else 0."""
    current = phase.scoring_versions.order_by("-number").first()
    program = config.digests["scoring_program"]
    reference = config.digests["reference_data"]
    if current is not None and (
        current.scoring_program_digest == program and current.reference_data_digest == reference
    ):
        return 0
    number = 1 if current is None else current.number + 1
    ScoringVersion.objects.create(
        phase=phase,
        number=number,
        bundle_file=bundle_file,
        scoring_program=config.scoring_program,
        scoring_entrypoint=config.scoring_entrypoint,
        reference_data=config.reference_data,
        scoring_program_digest=program,
        reference_data_digest=reference,
    )
    if current is None:
        Phase.objects.filter(pk=phase.pk).update(scoring_version=number)
        phase.scoring_version = number
        return 0
    return number


def _baselines_write(phase: Phase, config: PhaseConfig) -> None:
    """Baselines by folder: a new or changed folder (by digest) loses its scores and is
    scored again; an unchanged one keeps them."""
    wanted = dict(config.baselines)
    phase.baselines.exclude(folder__in=list(wanted)).delete()
    existing = {b.folder: b for b in phase.baselines.all()}
    for order, (folder, digest) in enumerate(config.baselines):
        baseline = existing.get(folder)
        if baseline is None:
            Baseline.objects.create(phase=phase, folder=folder, digest=digest, order=order)
        elif baseline.digest != digest or baseline.order != order:
            if baseline.digest != digest:
                baseline.scores.all().delete()
            Baseline.objects.filter(pk=baseline.pk).update(digest=digest, order=order)


def bundle_files_in_use(challenge: Challenge) -> set[str]:
    """Stored bundles a scoring version still names (kept when a newer bundle replaces them)."""
    return set(
        ScoringVersion.objects.filter(phase__challenge=challenge).values_list(
            "bundle_file", flat=True
        )
    )


def _rows_write(challenge: Challenge, config: ChallengeConfig) -> None:
    ChallengeHost.objects.filter(challenge=challenge).exclude(
        user__username__in=config.hosts
    ).delete()
    users = get_user_model().objects.filter(username__in=config.hosts).order_by("pk")
    present = set(
        ChallengeHost.objects.filter(challenge=challenge).values_list("user_id", flat=True)
    )
    ChallengeHost.objects.bulk_create(
        ChallengeHost(challenge=challenge, user=u) for u in users if u.pk not in present
    )
    Phase.objects.filter(challenge=challenge).exclude(
        slug__in=[p.slug for p in config.phases]
    ).delete()
    for order, phase in enumerate(config.phases):
        _phase_write(challenge, phase, order)


def _apply_locked(
    *, user: AbstractBaseUser, config: ChallengeConfig, sha256: str, stored: str
) -> tuple[Challenge, bool, bool, list[PlanOp]]:
    """(challenge, created, changed, plan), in one transaction holding the challenge's lock."""
    with transaction.atomic():
        challenge = challenge_get(slug=config.slug, for_update=True)
        _may_apply(user=user, challenge=challenge)
        current = None if challenge is None else config_from_challenge(challenge)
        plan = bundle_plan(current, config)
        if challenge is not None and (challenge.bundle_sha256 == sha256 or not plan_changes(plan)):
            return challenge, False, False, plan
        fields = {
            "title": config.title,
            "description_source": config.description_source,
            "description_html": config.description_html,
            "visibility": config.visibility,
            "participation": config.participation,
            "max_team_size": config.max_team_size,
            "bundle_sha256": sha256,
            "bundle_file": stored,
        }
        created = challenge is None
        replaced = None if challenge is None else challenge.bundle_file
        if challenge is None:
            challenge = Challenge.objects.create(slug=config.slug, bundle_version=1, **fields)
        else:
            for name, value in fields.items():
                setattr(challenge, name, value)
            challenge.bundle_version += 1
            challenge.save()
        _rows_write(challenge, config)
        # Baselines without a score in their phase's current version are scored after commit.
        baselines_score_enqueue(challenge=challenge)
        if replaced is not None and replaced not in bundle_files_in_use(challenge):
            transaction.on_commit(partial(_stored_delete, replaced))
        return challenge, created, True, plan


def _reveals_sync(slug: str) -> None:
    """Book, move or cancel the phases' reveal reservations once the bundle is committed. The
    bundle stays applied if this fails: the every-minute overdue check still reveals."""
    try:
        challenge_reveals_sync(slug=slug)
    except Exception:
        logger.exception("Could not update the reveal reservations of challenge %s", slug)


def challenge_apply(
    *, user: AbstractBaseUser, bundle_path: Path, sha256: str, dry_run: bool = False
) -> ApplyResult:
    """Apply the bundle at `bundle_path` (its bytes' sha256 given), or plan it (`dry_run`).

    Raises UnsafeBundle (`unsafe_archive`), InvalidBundle (`invalid_bundle`, fields by YAML
    path) and PermissionDenied: creating needs `benchmarks.add_challenge`, changing needs a
    host or staff. Idempotent: the same bytes, or a bundle that changes nothing, leave the
    challenge and its `bundle_version` as they are. Locks the challenge row.
    """
    with BundleArchive(bundle_path) as archive:
        config = bundle_config(archive, uploader=user.get_username())
    existing = challenge_get(slug=config.slug)
    _may_apply(user=user, challenge=existing)
    if dry_run:
        current = None if existing is None else config_from_challenge(existing)
        return ApplyResult(config.slug, bundle_plan(current, config), None, False, True)
    if existing is not None and existing.bundle_sha256 == sha256:
        # The same bytes again: nothing to store or write (decided again under the lock by
        # whoever applies different bytes).
        plan = bundle_plan(config_from_challenge(existing), config)
        return ApplyResult(config.slug, plan, existing, False, False)
    key = f"{BUNDLE_PREFIX}/{config.slug}/{new_hex_id()}/bundle.zip"
    with bundle_path.open("rb") as source:
        stored = storages["default"].save(key, File(source, name="bundle.zip"))
    try:
        for attempt in range(1, _CREATE_ATTEMPTS + 1):
            try:
                challenge, created, changed, plan = _apply_locked(
                    user=user, config=config, sha256=sha256, stored=stored
                )
                break
            except IntegrityError:
                # Another apply created the slug first: apply again as an update. Any other
                # refusal by a constraint is not ours to retry.
                if attempt == _CREATE_ATTEMPTS or challenge_get(slug=config.slug) is None:
                    raise
    except BaseException:
        _stored_delete(stored)
        raise
    if not changed:
        _stored_delete(stored)
    else:
        _reveals_sync(config.slug)
    return ApplyResult(config.slug, plan, challenge, created, False)
