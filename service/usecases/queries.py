"""Read-side use cases: reconciliation history and pass history. Read only; one short
transaction each."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime

from service.domain.records import PassRecord, Reconciliation
from service.ports import UnitOfWork


def history(
    uow: UnitOfWork,
    *,
    since: datetime | None = None,
    gpu: str | None = None,
    limit: int | None = None,
) -> list[Reconciliation]:
    with uow:
        return uow.reconciliations.history(since=since, gpu=gpu, limit=limit)


def passes(uow: UnitOfWork, limit: int = 20) -> list[PassRecord]:
    with uow:
        return uow.passes.recent(limit)


@dataclass(frozen=True)
class Snapshot:
    """What /metrics exposes, read in one transaction."""

    last_pass: PassRecord | None
    last_success: PassRecord | None
    reconciliations: int
    skips: int
    median_abs_error_pct: float | None  # over the most recent reconciliations
    median_window: int  # how many: RECENT_FOR_MEDIAN
    tags_pending: int  # result tags MLflow has not accepted yet (the write-back outbox)
    # The active factor set's time-ordered backtest (None before any set): median absolute
    # % error of raw and of calibrated predictions on the same targets, calibrated P10-P90
    # coverage, and how many targets.
    backtest_raw_pct: float | None = None
    backtest_calibrated_pct: float | None = None
    backtest_coverage: float | None = None
    backtest_targets: int | None = None


RECENT_FOR_MEDIAN = 200


def snapshot(uow: UnitOfWork) -> Snapshot:
    with uow:
        recent = uow.passes.recent(50)
        errors = uow.reconciliations.recent_abs_errors(RECENT_FOR_MEDIAN)
        active = uow.factor_sets.active()
        scores = {} if active is None else dict(active.provenance)
        return Snapshot(
            last_pass=recent[0] if recent else None,
            last_success=next((p for p in recent if p.status == "succeeded"), None),
            reconciliations=uow.reconciliations.count(),
            skips=uow.skips.count(),
            median_abs_error_pct=statistics.median(errors) if errors else None,
            median_window=RECENT_FOR_MEDIAN,
            tags_pending=uow.outbox.count(),
            backtest_raw_pct=_number(scores.get("backtest_raw_median_ape")),
            backtest_calibrated_pct=_number(scores.get("backtest_median_ape")),
            backtest_coverage=_number(scores.get("backtest_coverage")),
            backtest_targets=_whole(scores.get("backtest_targets")),
        )


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
