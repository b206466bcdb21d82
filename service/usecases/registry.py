"""Stored predictions: save, record, link, unlink, show, list. Each use case is one function
over ports (a unit of work per transaction, the MLflow run source where the run is checked);
`Registry` wires the adapters into them. No transaction is held across an MLflow call."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from service.domain import comparison
from service.domain.errors import ConflictError, InputError, NotFoundError
from service.domain.hardware import Catalog, normalize_precision
from service.domain.records import (
    ESTIMATE_TAG,
    EstimateKind,
    FactorSource,
    Reconciliation,
    SavedEstimate,
)
from service.domain.values import Estimate, Hardware, Interval
from service.ports import RunSource, UnitOfWork
from service.usecases.context import Context
from service.usecases.results.answers import EstimateDetail, Unlinked


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
    deadline: datetime | None = None,
) -> SavedEstimate:
    """Store a computed estimate as an immutable prediction (with the deadline its run is
    to finish by, if any: service.domain.forecast)."""
    predicted = result.wall_seconds if interval is None else interval.p50
    return _store(
        uow, "computed", result.request.hardware, predicted, now,
        estimate=result, interval=interval, factor_set_version=factor_set_version,
        factor_source=factor_source, label=label, deadline=deadline,
    )  # fmt: skip


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
    return _store(
        uow, "external", hardware, predicted_seconds, now, factor_source="external", label=label
    )


def _store(
    uow: UnitOfWork,
    kind: EstimateKind,
    hardware: Hardware,
    predicted_wall_seconds: float,
    now: datetime,
    **details: Any,
) -> SavedEstimate:
    """A new immutable prediction with a fresh id, stored in its own transaction."""
    saved = SavedEstimate(
        id=new_estimate_id(),
        kind=kind,
        created_at=now,
        gpu=hardware.gpu,
        gpus=hardware.gpus,
        precision=hardware.precision,
        predicted_wall_seconds=predicted_wall_seconds,
        **details,
    )
    with uow:
        uow.estimates.add(saved)
        uow.commit()
    return saved


def link(
    reader: UnitOfWork,
    writer: UnitOfWork,
    estimate_id: str,
    run_id: str,
    *,
    now: datetime,
    source: Callable[[], RunSource] | None = None,
) -> bool:
    """Link an MLflow run to an estimate after the fact: True when a new link was made,
    False when it already existed; a run already linked to another estimate is a
    ConflictError. With a `source` (made only once the estimate is known), the run must
    exist there (NotFoundError; UnavailableError when MLflow cannot say), asked outside any
    transaction; without one it is linked unchecked (`--force`: a server Reckon cannot
    reach yet)."""
    run_id = run_id.strip()
    if not run_id:
        raise InputError("run id must not be empty")
    show(reader, estimate_id)  # an unknown estimate fails before MLflow is asked
    if source is not None and not source().runs_by_id([run_id]):
        raise NotFoundError(f"no MLflow run {run_id!r} (link it anyway with --force)")
    with writer:
        owner = writer.links.estimate_for_run(run_id)
        if owner == estimate_id:
            return False
        if owner is not None:
            raise ConflictError(f"run {run_id} is already linked to estimate {owner}")
        writer.links.add(estimate_id, run_id, "manual", now)
        writer.commit()
    return True


def unlink(
    reader: UnitOfWork,
    writer: UnitOfWork,
    estimate_id: str,
    run_id: str,
    *,
    now: datetime,
    source: Callable[[], RunSource] | None = None,
) -> Unlinked:
    """Undo a link. With a `source`, the run's reckon.estimate_id tag is removed first when
    it names this estimate (else the next pass would link it again), so an MLflow outage
    changes nothing (UnavailableError); without one MLflow is not touched (`--force`). The
    estimate's reconciliation is recomputed from its remaining runs (and forgotten when
    none of them has finished)."""
    not_linked = NotFoundError(f"run {run_id} is not linked to estimate {estimate_id}")
    with reader:
        if reader.links.estimate_for_run(run_id) != estimate_id:
            raise not_linked
    tag_removed = False
    if source is not None:
        runs = source()
        tagged = [run for run in runs.runs_by_id([run_id]) if run.estimate_id == estimate_id]
        if tagged:
            runs.delete_tag(run_id, ESTIMATE_TAG)
            tag_removed = True
    result: Reconciliation | None
    with writer:
        saved = writer.estimates.get(estimate_id)
        if saved is None or not writer.links.remove(estimate_id, run_id, now):
            raise not_linked  # unlinked by someone else since the read
        remaining = writer.runs.for_estimates([estimate_id]).get(estimate_id, [])
        result = comparison.reconcile(saved, remaining)
        if result is None:
            writer.reconciliations.delete([estimate_id])
        else:
            writer.reconciliations.save_many([result], pass_id=None, now=now)
        writer.commit()
    return Unlinked(estimate_id, run_id, tag_removed, result)


def show(uow: UnitOfWork, estimate_id: str) -> EstimateDetail:
    with uow:
        saved = uow.estimates.get(estimate_id)
        if saved is None:
            raise NotFoundError(f"no estimate with id {estimate_id!r}")
        return EstimateDetail(saved, uow.links.runs_for(estimate_id))


def list_saved(
    uow: UnitOfWork, *, limit: int = 50, since: datetime | None = None, gpu: str | None = None
) -> list[SavedEstimate]:
    with uow:
        return uow.estimates.list(limit=limit, since=since, gpu=gpu)


class Registry:
    """The registry's use cases with the adapters wired in."""

    def __init__(self, context: Context) -> None:
        self._context = context

    def record(
        self,
        *,
        predicted_seconds: float,
        gpu: str,
        gpus: int,
        precision: str,
        label: str | None = None,
    ) -> SavedEstimate:
        """A planner's own prediction: a duration and the run configuration."""
        c = self._context
        return record_external(
            c.adapters.unit_of_work(), c.catalog, predicted_seconds=predicted_seconds,
            gpu=gpu, gpus=gpus, precision=precision, now=c.clock.now(), label=label,
        )  # fmt: skip

    def link(self, estimate_id: str, run_id: str, *, force: bool = False) -> bool:
        c = self._context
        source = None if force else c.adapters.run_source
        return link(
            c.adapters.reader(), c.adapters.unit_of_work(), estimate_id, run_id,
            now=c.clock.now(), source=source,
        )  # fmt: skip

    def unlink(self, estimate_id: str, run_id: str, *, force: bool = False) -> Unlinked:
        c = self._context
        source = None if force else c.adapters.run_source
        return unlink(
            c.adapters.reader(), c.adapters.unit_of_work(), estimate_id, run_id,
            now=c.clock.now(), source=source,
        )  # fmt: skip

    def estimate_detail(self, estimate_id: str) -> EstimateDetail:
        return show(self._context.adapters.reader(), estimate_id)

    def list_estimates(self, *, limit: int = 50, gpu: str | None = None) -> list[SavedEstimate]:
        c = self._context
        return list_saved(c.adapters.reader(), limit=limit, gpu=c.gpu_name(gpu))
