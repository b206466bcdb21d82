"""`reckon import`: learn from past runs. For finished runs that have no estimate and whose
configuration is complete (from the run, else from the caller's defaults), store a
retrospective estimate (kind "retrospective", dated at the run's start, made with the
published prior), link it (source "import"), then reconcile through the ordinary pass
before returning. Importing twice imports nothing new: a linked run is skipped.

The use case depends on a small run-listing port of its own and a `reconcile` callable (the
composition root hands it the ordinary pass), never on an adapter."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from service.calibration.model import Prior
from service.domain import comparison, flops
from service.domain.errors import InputError
from service.domain.hardware import Catalog, normalize_precision
from service.domain.records import ObservedRun, RunObservables, SavedEstimate
from service.domain.values import EstimateRequest, Factors, Hardware, Model
from service.ports import UnitOfWork
from service.usecases.registry import new_estimate_id
from service.usecases.results.loop import ImportedRun, ImportOutcome, ImportSkip, PassOutcome

LINK_SOURCE = "import"

# Skip reasons (stable codes) and the hint each one gives.
LINKED = "linked"
NO_GPU = "no_gpu"
NO_GPUS = "no_gpu_count"
NO_PRECISION = "no_precision"
NO_TOKENS = "no_tokens"
NO_PARAMS = "no_params"
UNKNOWN_GPU = "unknown_gpu"
BAD_CONFIG = "bad_configuration"
MISSING_TIMES = "missing_times"
NO_METRICS = "no_metrics"


class FinishedRuns(Protocol):
    """Where past runs come from (the MLflow adapter implements it)."""

    def finished_runs(
        self,
        experiments: Sequence[str] = (),
        since: datetime | None = None,
        fallback_gpus: int | None = None,
        linked: Callable[[Sequence[str]], Mapping[str, str]] | None = None,
    ) -> Iterator[ObservedRun]:
        """FINISHED runs; those `linked` names an owner for come back with `estimate_id`
        set and nothing derived (a source may also ignore `linked`)."""
        ...

    def missing_experiments(self) -> list[str]:
        """Configured experiments the listing went without (they do not exist)."""
        ...


@dataclass(frozen=True)
class ImportOptions:
    """`reckon import` flags. gpu/gpus/precision fill in only what a run does not say."""

    experiments: tuple[str, ...] = ()
    since: datetime | None = None
    gpu: str | None = None
    gpus: int | None = None
    precision: str | None = None
    dry_run: bool = False


def import_runs(
    uow: UnitOfWork,
    source: FinishedRuns,
    catalog: Catalog,
    prior: Prior,
    options: ImportOptions,
    *,
    now: datetime,
    reconcile: Callable[[], PassOutcome],
) -> ImportOutcome:
    """One import. Bad flags (unknown --gpu, a precision the GPU lacks) are an InputError
    before anything is read; a run that cannot be used is a skip with its reason."""
    if options.gpu is not None:
        catalog.resolve(options.gpu)
    if options.gpus is not None and options.gpus < 1:
        raise InputError(f"--gpus must be at least 1, got {options.gpus}")

    def owners_of(run_ids: Sequence[str]) -> Mapping[str, str]:
        with uow:  # one short read per page of the listing; no transaction across MLflow
            return uow.links.estimates_for_runs(run_ids)

    runs = list(source.finished_runs(options.experiments, options.since, options.gpus, owners_of))
    owners = owners_of([run.run_id for run in runs if not run.estimate_id])
    planned: list[tuple[ObservedRun, SavedEstimate, ImportedRun]] = []
    skipped = [
        ImportSkip(skip.run_id, skip.reason, skip.detail)
        for skip in map(comparison.missing_experiment, source.missing_experiments())
    ]
    for run in runs:
        if run.estimate_id or run.run_id in owners:
            owner = run.estimate_id or owners[run.run_id]
            skipped.append(ImportSkip(run.run_id, LINKED, f"already linked to estimate {owner}"))
            continue
        result = _retrospective(run, catalog, prior, options)
        if isinstance(result, ImportSkip):
            skipped.append(result)
        else:
            planned.append((run, *result))
    if options.dry_run:
        imported = tuple(dataclasses.replace(item, estimate_id=None) for _, _, item in planned)
        return ImportOutcome(len(runs), imported, tuple(skipped), dry_run=True)
    with uow:
        for _, saved, _ in planned:
            uow.estimates.add(saved)
        uow.links.add_many([(saved.id, run.run_id) for run, saved, _ in planned], LINK_SOURCE, now)
        uow.commit()
    ids = tuple(saved.id for _, saved, _ in planned)
    outcome = reconcile() if planned else None
    done = set(ids) & {item.estimate_id for item in outcome.reconciled} if outcome else set()
    return ImportOutcome(
        runs_seen=len(runs),
        imported=tuple(item for _, _, item in planned),
        skipped=tuple(skipped),
        dry_run=False,
        reconciled=len(done),
        pass_status=None if outcome is None else outcome.status,
        pass_id=None if outcome is None else outcome.pass_id,
        factor_set=None if outcome is None else outcome.factor_set,
        estimate_ids=ids,
    )


def _nothing_read(derived: RunObservables) -> bool:
    """No profile recognised the run and it states no configuration of its own."""
    return derived.profile is None and all(
        value is None
        for value in (
            derived.tokens, derived.model_flops, derived.throughput, derived.compute_seconds,
            derived.gpus, derived.gpu, derived.precision, derived.params,
        )
    )  # fmt: skip


def _retrospective(
    run: ObservedRun, catalog: Catalog, prior: Prior, options: ImportOptions
) -> tuple[SavedEstimate, ImportedRun] | ImportSkip:
    """The estimate the published prior would have made for this run's configuration."""
    derived = run.observables or RunObservables(profile=run.profile)
    if derived.problem is not None:
        reason, detail = derived.problem
        return ImportSkip(run.run_id, reason, detail)
    if run.started_at is None or run.ended_at is None or run.ended_at <= run.started_at:
        return ImportSkip(run.run_id, MISSING_TIMES, "run has no usable start and end time")
    if _nothing_read(derived):
        return ImportSkip(
            run.run_id,
            NO_METRICS,
            "the run logged nothing Reckon reads (no known trainer's metrics or params, no "
            "reckon.* configuration): a trainer that logs every N steps logs nothing over "
            "fewer steps",
        )
    gpu_name = derived.gpu or options.gpu
    if gpu_name is None:
        return ImportSkip(run.run_id, NO_GPU, "no GPU type: tag reckon.gpu or pass --gpu")
    gpus = derived.gpus or options.gpus
    if gpus is None:
        return ImportSkip(run.run_id, NO_GPUS, "no GPU count: tag reckon.gpus or pass --gpus")
    precision_name = derived.precision or options.precision
    if precision_name is None:
        return ImportSkip(
            run.run_id, NO_PRECISION, "no precision: tag reckon.precision or pass --precision"
        )
    params, tokens, label = derived.params, derived.tokens, f"import {run.run_id}"
    if tokens is None and params is None and derived.model_flops:
        # Model FLOPs alone (HF's total_flos for a family Reckon cannot count): the estimate
        # holds them as 6·N·D with D = 1, so its FLOPs, and the factors learned, are exact.
        params, tokens = derived.model_flops / 6.0, 1.0
        label += " (model FLOPs only: no token count)"
    if tokens is None:
        return ImportSkip(run.run_id, NO_TOKENS, "no token count: tag reckon.tokens")
    if params is None:
        return ImportSkip(run.run_id, NO_PARAMS, "no model size: tag reckon.params")
    try:
        spec = catalog.resolve(gpu_name)
        precision = normalize_precision(precision_name)
        peak = catalog.peak_flops(spec.name, precision)
    except InputError as error:  # an unknown name, or a precision the chip lacks
        return ImportSkip(run.run_id, UNKNOWN_GPU, str(error))
    try:
        request = EstimateRequest(
            model=Model(params, tokens),
            hardware=Hardware(spec.name, gpus, precision),
            factors=Factors(prior.utilization, prior.overhead),
            recompute=derived.recompute or "none",
        )
        result = flops.estimate(request, peak)
    except InputError as error:  # each run judged alone: one refused run skips only itself
        return ImportSkip(run.run_id, BAD_CONFIG, f"run {run.run_id}: {error}")
    saved = SavedEstimate(
        id=new_estimate_id(),
        kind="retrospective",
        created_at=run.started_at,  # what the prior would have said when the run began
        gpu=spec.name,
        gpus=gpus,
        precision=precision,
        predicted_wall_seconds=result.wall_seconds,
        estimate=result,
        factor_source="prior",
        label=label,
    )
    item = ImportedRun(
        run_id=run.run_id,
        estimate_id=saved.id,
        profile=derived.profile,
        gpu=spec.name,
        gpus=gpus,
        precision=precision,
        predicted_seconds=result.wall_seconds,
    )
    return saved, item
