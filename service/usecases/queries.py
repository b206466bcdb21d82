"""Read-side use cases: reconciliation history, accuracy, running runs projected, pass
history and the metrics snapshot. Read only; one short transaction each. `Queries` wires
the adapters into them."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from datetime import datetime

from service.domain.records import (
    ACCURACY_ALIASES,
    HistoryPage,
    HistoryQuery,
    Reconciliation,
    RunningProjection,
)
from service.ports import RunSource, UnitOfWork
from service.usecases.context import Context
from service.usecases.results.loop import Jobs, Snapshot
from service.usecases.results.reads import Accuracy


def history(
    uow: UnitOfWork,
    *,
    since: datetime | None = None,
    gpu: str | None = None,
    limit: int | None = None,
) -> list[Reconciliation]:
    with uow:
        return uow.reconciliations.history(since=since, gpu=gpu, limit=limit)


def recent_jobs(uow: UnitOfWork, schedule: str, timezone: str, limit: int = 20) -> Jobs:
    """The recent passes and what the write-back outbox still owes, in one transaction."""
    with uow:
        return Jobs(schedule, timezone, uow.passes.recent(limit), uow.outbox.owed())


RECENT_FOR_MEDIAN = 200


def snapshot(uow: UnitOfWork) -> Snapshot:
    with uow:
        recent = uow.passes.recent(50)
        errors = uow.reconciliations.recent_abs_errors(RECENT_FOR_MEDIAN)
        active = uow.factor_sets.active()
        scores = {} if active is None else dict(active.provenance)
        owed = uow.outbox.owed()
        return Snapshot(
            last_pass=recent[0] if recent else None,
            last_success=next((p for p in recent if p.status == "succeeded"), None),
            reconciliations=uow.reconciliations.count(),
            skips=uow.skips.count(),
            median_abs_error_pct=statistics.median(errors) if errors else None,
            median_window=RECENT_FOR_MEDIAN,
            tags_pending=owed.pending,
            tags_blocked=owed.blocked,
            backtest_raw_pct=_number(scores.get("backtest_raw_median_ape")),
            backtest_calibrated_pct=_number(scores.get("backtest_median_ape")),
            backtest_coverage=_number(scores.get("backtest_coverage")),
            backtest_targets=_whole(scores.get("backtest_targets")),
        )


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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


class Queries:
    """What the loop built, read back: history, accuracy, running runs, passes, metrics."""

    def __init__(self, context: Context) -> None:
        self._context = context

    def history(
        self, *, since: str | None = None, gpu: str | None = None, limit: int | None = None
    ) -> list[Reconciliation]:
        c = self._context
        return history(c.adapters.reader(), since=c.since(since), gpu=c.gpu_name(gpu), limit=limit)

    def history_page(
        self,
        *,
        since: str | None = None,
        gpu: str | None = None,
        search: str | None = None,
        sort: str = "newest",
        limit: int | None = None,
        offset: int = 0,
        precision: str | None = None,
    ) -> HistoryPage:
        """A page of the history, searched and sorted in the database, and how many rows
        match in all (what a table pages through)."""
        c = self._context
        query = HistoryQuery(
            since=c.since(since), gpu=c.gpu_name(gpu), search=search or None, sort=sort,
            limit=limit, offset=offset, precision=precision or None,
        )  # fmt: skip
        with c.adapters.reader() as uow:
            rows, total = uow.reconciliations.page(query)
        return HistoryPage(rows, total, query)

    def accuracy(self, *, by: str | None = None, since: str | None = None) -> Accuracy:
        return self.accuracies((by,), since=since)[0]

    def accuracies(self, bys: Sequence[str | None], *, since: str | None = None) -> list[Accuracy]:
        """Accuracy grouped several ways from one scoring (the backtest runs once)."""
        from service.usecases.accuracy import accuracies

        c = self._context
        return accuracies(
            c.adapters.reader(),
            c.adapters.prior(),
            c.fit_parameters,
            bys=[ACCURACY_ALIASES.get(by, by) if by is not None else None for by in bys],
            since=c.since(since),
        )

    def running(self) -> list[RunningProjection]:
        c = self._context
        return running(c.adapters.reader(), c.adapters.run_source(), c.clock.now())

    def jobs(self, limit: int = 20) -> Jobs:
        c = self._context
        return recent_jobs(c.adapters.reader(), c.policy.schedule, c.policy.timezone, limit)

    def metrics(self) -> Snapshot:
        return snapshot(self._context.adapters.reader())
