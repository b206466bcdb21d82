"""Linked runs still RUNNING, projected to their finish from the throughput logged so far,
so a planner hears about a slip before the run ends. Read only."""

from __future__ import annotations

import math
from datetime import datetime

from service.domain.records import RunningProjection
from service.ports import RunSource, UnitOfWork


def running(uow: UnitOfWork, source: RunSource, now: datetime) -> list[RunningProjection]:
    """Projected wall time = tokens / throughput so far, stretched by the estimate's own
    overhead share (the run has not shown its overhead yet); without a throughput, no
    projection, only the elapsed time against the plan."""
    runs = [run for run in source.running_runs() if run.started_at is not None]
    with uow:
        owners = uow.links.estimates_for_runs([run.run_id for run in runs])
        wanted = [owners.get(run.run_id) or run.estimate_id or "" for run in runs]
        saved = uow.estimates.get_many([estimate_id for estimate_id in wanted if estimate_id])
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
        projections.append(
            RunningProjection(
                run_id=run.run_id,
                estimate_id=estimate_id,
                started_at=run.started_at,
                elapsed_seconds=(now - run.started_at).total_seconds(),
                predicted_seconds=predicted,
                projected_seconds=projected,
                slip_pct=None if projected is None else 100.0 * (projected / predicted - 1.0),
            )
        )
    return projections
