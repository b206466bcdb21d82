"""Live forecasts of linked runs still RUNNING (`reckon running`, `reckon forecast`, the
hourly job, /metrics): each run projected from its throughput so far, with P10/P50/P90
finish times and whether it is at risk of missing its estimate's deadline
(service.domain.forecast says how), and the forecast job that writes them on the runs.

The job (`forecast`) takes its own lock, never the nightly pass's: a second forecast run
while one holds it does nothing and says so, and a forecast never waits on, or holds up,
a reconcile pass. Its tags go through the write-back outbox in one transaction, then the
outbox is flushed; MLflow unreachable leaves them queued, and the next forecast run or
nightly pass writes them (a newer forecast replaces an owed one, merged per tag)."""

from __future__ import annotations

import math
from datetime import datetime

from service.calibration.model import PRIOR_KEY, FactorSet
from service.domain.forecast import Spread, eta, eta_tags
from service.domain.records import PendingTags, RunningProjection, SavedEstimate
from service.ports import PassLock, RunSource, UnitOfWork
from service.usecases.nightly.write_back import write_back
from service.usecases.results.loop import ForecastRun


def spread_of(active: FactorSet | None, saved: SavedEstimate) -> Spread:
    """The active set's calibrated σ below/above the median for the estimate's segment (or
    the set's prior entry), else the estimate's own saved range, else none."""
    if active is not None:
        entry = active.segments.get(saved.segment) or active.segments.get(PRIOR_KEY)
        if entry is not None:
            return Spread.of_sigmas(entry.log_sigma_low, entry.log_sigma_high)
    if saved.interval is not None:
        return Spread.of_interval(saved.interval.p10, saved.interval.p50, saved.interval.p90)
    return Spread()


def running(uow: UnitOfWork, source: RunSource, now: datetime) -> list[RunningProjection]:
    """Projected wall time = tokens / throughput so far, stretched by the estimate's own
    overhead share (the run has not shown its overhead yet); without a throughput, no
    projection, only the elapsed time against the plan. The finish times count from the
    first start of any run linked to the estimate that a pass has seen (restarts count)."""
    runs = [run for run in source.running_runs() if run.started_at is not None]
    with uow:
        owners = uow.links.estimates_for_runs([run.run_id for run in runs])
        wanted = [owners.get(run.run_id) or run.estimate_id or "" for run in runs]
        ids = [estimate_id for estimate_id in wanted if estimate_id]
        saved = uow.estimates.get_many(ids)
        earlier = uow.runs.for_estimates(ids) if ids else {}
        active = uow.factor_sets.active()
    projections = []
    for run, estimate_id in zip(runs, wanted, strict=True):
        estimate = saved.get(estimate_id)
        if estimate is None or run.started_at is None:
            continue
        projected = None
        throughput = run.throughput
        if (
            estimate.estimate is not None
            and throughput is not None
            and math.isfinite(throughput)
            and throughput > 0
        ):
            request = estimate.estimate.request
            projected = request.model.tokens / throughput / (1.0 - request.factors.overhead)
        predicted = estimate.predicted_wall_seconds
        starts = [r.started_at for r in earlier.get(estimate_id, []) if r.started_at is not None]
        first = min([run.started_at, *starts])
        projections.append(
            RunningProjection(
                run_id=run.run_id,
                estimate_id=estimate_id,
                started_at=run.started_at,
                elapsed_seconds=(now - run.started_at).total_seconds(),
                predicted_seconds=predicted,
                projected_seconds=projected,
                slip_pct=None if projected is None else 100.0 * (projected / predicted - 1.0),
                eta=None
                if projected is None
                else eta(
                    now,
                    (now - first).total_seconds(),
                    projected,
                    spread_of(active, estimate),
                    estimate.deadline,
                ),
            )
        )
    return projections


def forecast(
    reader: UnitOfWork,
    writer: UnitOfWork,
    source: RunSource,
    lock: PassLock | None,
    now: datetime,
    *,
    write: bool = True,
) -> ForecastRun:
    """Forecast every linked RUNNING run, queue its `reckon.eta*` tags in the outbox, then
    write what the outbox owes (this run's and any earlier). Non-blocking on its lock.
    `write` False (RECKON_WRITE_BACK_TAGS=false) forecasts and tags nothing."""
    if lock is not None and not lock.acquire():
        return ForecastRun([], locked=True, holder=lock.holder)
    try:
        forecasts = running(reader, source, now)
        if not write:
            return ForecastRun(forecasts)
        owed = [
            PendingTags(item.run_id, item.estimate_id, eta_tags(item.eta))
            for item in forecasts
            if item.eta is not None
        ]
        if owed:
            with writer:
                writer.outbox.queue(owed, pass_id=None, now=now)
                writer.commit()
        written, left = write_back(writer, source)
        return ForecastRun(forecasts, written, left)
    finally:
        if lock is not None:
            lock.release()
