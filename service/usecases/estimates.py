"""Use cases for the forward and inverse questions: turn a user's raw inputs into a
validated request against the hardware catalog, then estimate, plan or tabulate. No I/O
here beyond the catalog handed in; storing estimates comes in through ports."""

from __future__ import annotations

import uuid
from datetime import datetime

from service.domain import comparison, flops
from service.domain.errors import ConflictError, InputError, NotFoundError
from service.domain.hardware import PRECISIONS, Catalog, normalize_precision
from service.domain.inputs import RawInputs
from service.domain.records import FactorSource, Reconciliation, SavedEstimate
from service.domain.values import (
    Estimate,
    EstimateRequest,
    Factors,
    Hardware,
    Interval,
    Model,
    Plan,
    Recompute,
    SensitivityRow,
)
from service.ports import UnitOfWork


def build_request(catalog: Catalog, raw: RawInputs) -> EstimateRequest:
    """Validate and canonicalise: the GPU name becomes the catalog's, the precision must be
    one the chip has (checked here so the error names the GPU)."""
    spec = catalog.resolve(raw.gpu)
    precision = normalize_precision(raw.precision)
    catalog.peak_flops(spec.name, precision)
    defaults = Factors()
    return EstimateRequest(
        model=Model(raw.params, raw.tokens, raw.layers, raw.hidden_size, raw.seq_len),
        hardware=Hardware(spec.name, raw.gpus, precision),
        factors=Factors(
            defaults.utilization if raw.utilization is None else raw.utilization,
            defaults.overhead if raw.overhead is None else raw.overhead,
        ),
        recompute=_recompute(raw.recompute),
        recompute_factor=raw.recompute_factor,
        price_per_gpu_hour=raw.price_per_gpu_hour,
        currency=raw.currency.strip().upper(),
    )


def _recompute(text: str) -> Recompute:
    value = text.strip().lower()
    if value in ("none", "off", "no"):
        return "none"
    if value in ("full", "on", "yes"):
        return "full"
    if value == "selective":
        return "selective"
    # Let the domain type produce the one error message for an unknown mode.
    return value  # type: ignore[return-value]


def compute(catalog: Catalog, request: EstimateRequest) -> Estimate:
    peak = catalog.peak_flops(request.hardware.gpu, request.hardware.precision)
    return flops.estimate(request, peak)


def plan(
    catalog: Catalog, request: EstimateRequest, deadline_seconds: float, multiple_of: int = 1
) -> Plan:
    peak = catalog.peak_flops(request.hardware.gpu, request.hardware.precision)
    return flops.plan_gpus(request, peak, deadline_seconds, multiple_of)


def sensitivity(
    catalog: Catalog, request: EstimateRequest, extra: dict[str, list[str]]
) -> tuple[Estimate, list[SensitivityRow]]:
    """The seed's default table plus any variables the user names (theirs replace ours)."""
    rows = flops.sensitivity(request, catalog.peak_flops, variations(catalog, request, extra))
    return compute(catalog, request), rows


def variations(
    catalog: Catalog, request: EstimateRequest, extra: dict[str, list[str]]
) -> dict[str, list[str]]:
    """What the table varies: the defaults (the precisions this GPU has) and the user's."""
    spec = catalog.resolve(request.hardware.gpu)
    precisions = [p for p in PRECISIONS if p in spec.peak_flops]
    return {**flops.default_variations(request, precisions), **extra}


# --- the registry: save, record, link, read --------------------------------------------------


def new_estimate_id() -> str:
    """16 hex digits: short enough to type into `reckon link`, 64 random bits."""
    return uuid.uuid4().hex[:16]


def save(
    uow: UnitOfWork,
    result: Estimate,
    *,
    now: datetime,
    label: str | None = None,
    interval: Interval | None = None,
    factor_set_version: int | None = None,
    factor_source: FactorSource = "given",
) -> SavedEstimate:
    """Store a computed estimate as an immutable prediction."""
    hardware = result.request.hardware
    saved = SavedEstimate(
        id=new_estimate_id(),
        kind="computed",
        created_at=now,
        gpu=hardware.gpu,
        gpus=hardware.gpus,
        precision=hardware.precision,
        predicted_wall_seconds=result.wall_seconds if interval is None else interval.p50,
        estimate=result,
        interval=interval,
        factor_set_version=factor_set_version,
        factor_source=factor_source,
        label=label,
    )
    with uow:
        uow.estimates.add(saved)
        uow.commit()
    return saved


def record_external(
    uow: UnitOfWork,
    catalog: Catalog,
    *,
    predicted_seconds: float,
    gpu: str,
    gpus: int,
    precision: str,
    now: datetime,
    label: str | None = None,
) -> SavedEstimate:
    """Store a planner's own prediction (a duration and the run configuration)."""
    spec = catalog.resolve(gpu)
    hardware = Hardware(spec.name, gpus, normalize_precision(precision))
    catalog.peak_flops(hardware.gpu, hardware.precision)
    if not predicted_seconds > 0:
        raise InputError("the predicted duration must be longer than zero")
    saved = SavedEstimate(
        id=new_estimate_id(),
        kind="external",
        created_at=now,
        gpu=hardware.gpu,
        gpus=hardware.gpus,
        precision=hardware.precision,
        predicted_wall_seconds=predicted_seconds,
        factor_source="external",
        label=label,
    )
    with uow:
        uow.estimates.add(saved)
        uow.commit()
    return saved


def link(uow: UnitOfWork, estimate_id: str, run_id: str, *, now: datetime) -> bool:
    """Link an MLflow run to an estimate after the fact. Re-linking the same pair is a no-op
    (returns False); a run already linked to another estimate is a ConflictError."""
    run_id = run_id.strip()
    if not run_id:
        raise InputError("run id must not be empty")
    with uow:
        if uow.estimates.get(estimate_id) is None:
            raise NotFoundError(f"no estimate with id {estimate_id!r}")
        owner = uow.links.estimate_for_run(run_id)
        if owner == estimate_id:
            return False
        if owner is not None:
            raise ConflictError(f"run {run_id} is already linked to estimate {owner}")
        uow.links.add(estimate_id, run_id, "manual", now)
        uow.commit()
    return True


def unlink(
    uow: UnitOfWork, estimate_id: str, run_id: str, *, now: datetime
) -> Reconciliation | None:
    """Undo a link. The estimate's reconciliation is recomputed from its remaining runs
    (and forgotten when none of them has finished); returns the new one, if any."""
    with uow:
        saved = uow.estimates.get(estimate_id)
        if saved is None:
            raise NotFoundError(f"no estimate with id {estimate_id!r}")
        if not uow.links.remove(estimate_id, run_id):
            raise NotFoundError(f"run {run_id} is not linked to estimate {estimate_id}")
        remaining = uow.runs.for_estimates([estimate_id]).get(estimate_id, [])
        result = comparison.reconcile(saved, remaining)
        if result is None:
            uow.reconciliations.delete([estimate_id])
        else:
            uow.reconciliations.save_many([result], pass_id=None, now=now)
        uow.commit()
    return result


def show(uow: UnitOfWork, estimate_id: str) -> tuple[SavedEstimate, list[str]]:
    with uow:
        saved = uow.estimates.get(estimate_id)
        if saved is None:
            raise NotFoundError(f"no estimate with id {estimate_id!r}")
        return saved, uow.links.runs_for(estimate_id)


def list_saved(
    uow: UnitOfWork, *, limit: int = 50, since: datetime | None = None, gpu: str | None = None
) -> list[SavedEstimate]:
    with uow:
        return uow.estimates.list(limit=limit, since=since, gpu=gpu)
