"""Read-side use cases: reconciliation history (priced), accuracy, the spend, running runs
projected, pass history and the metrics snapshot. Read only; one short transaction each.
`Queries` wires the adapters into them."""

from __future__ import annotations

import dataclasses
import logging
import statistics
from collections.abc import Sequence
from datetime import datetime

from service.domain.errors import ReckonError
from service.domain.records import (
    ACCURACY_ALIASES,
    HistoryPage,
    HistoryQuery,
    Reconciliation,
    RunningProjection,
)
from service.domain.spending import priced
from service.ports import UnitOfWork
from service.usecases.cached_probe import CachedValue
from service.usecases.context import Context
from service.usecases.results.loop import Jobs, Snapshot
from service.usecases.results.reads import Accuracy, Spend

log = logging.getLogger(__name__)


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
RUNNING_MAX_AGE_SECONDS = 60.0
RUNNING_FIRST_WAIT_SECONDS = 2.0


def _running_unread(error: Exception) -> None:
    if isinstance(error, ReckonError):
        log.info("/metrics without the running runs: %s", error)
    else:
        log.warning("/metrics without the running runs: %s: %s", type(error).__name__, error)


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


class Queries:
    """What the loop built, read back: history, accuracy, spend, running runs, passes,
    metrics. History and accuracy are priced too (RECKON_PRICES_FILE, service.domain.money)."""

    def __init__(self, context: Context) -> None:
        self._context = context
        # /metrics' running series, loaded from MLflow in the background (a scrape never waits
        # on a slow or down MLflow beyond the first RUNNING_FIRST_WAIT_SECONDS).
        self._running: CachedValue[tuple[RunningProjection, ...] | None] = CachedValue(
            lambda: tuple(self.running()),
            None,
            _running_unread,
            max_age_seconds=RUNNING_MAX_AGE_SECONDS,
            first_wait_seconds=RUNNING_FIRST_WAIT_SECONDS,
        )

    def history(
        self, *, since: str | None = None, gpu: str | None = None, limit: int | None = None
    ) -> list[Reconciliation]:
        c = self._context
        rows = history(c.adapters.reader(), since=c.since(since), gpu=c.gpu_name(gpu), limit=limit)
        return priced(rows, c.prices)

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
        return HistoryPage(priced(rows, c.prices), total, query)

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
            prices=c.prices,
        )

    def spend(
        self, *, by: str | None = None, since: str | None = None, gpu: str | None = None
    ) -> Spend:
        """Planned against observed cost per experiment, GPU or month (service.usecases.spend)."""
        from service.usecases.spend import spend

        c = self._context
        prices = c.prices  # a bad prices file is an InputError before the database is read
        return spend(c.adapters.reader(), prices, by=by, since=c.since(since), gpu=c.gpu_name(gpu))

    def running(self) -> list[RunningProjection]:
        from service.usecases.forecast import running

        c = self._context
        return running(c.adapters.reader(), c.adapters.run_source(), c.clock.now())

    def jobs(self, limit: int = 20) -> Jobs:
        c = self._context
        return recent_jobs(c.adapters.reader(), c.policy.schedule, c.policy.timezone, limit)

    def metrics(self) -> Snapshot:
        """The stored numbers, and the linked runs RUNNING as last forecast from MLflow: read
        in the background once the last read is RUNNING_MAX_AGE_SECONDS old (a finished
        run's series goes with the next read); until a first read has finished a scrape
        waits for it RUNNING_FIRST_WAIT_SECONDS at most, never more. MLflow unreadable or
        not configured leaves the running series out and logs why."""
        snap = snapshot(self._context.adapters.reader())
        running, _ = self._running.read()
        return snap if running is None else dataclasses.replace(snap, running=running)
