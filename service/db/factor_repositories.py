"""Factor sets and the observations the refit reads. Observations are read as columns
(Core rows into numpy arrays) because the refit must handle a million reconciliations."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import cast

import numpy as np
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from service.calibration import FactorSet, Level, ObservationArrays, SegmentFactors
from service.db.tables import EstimateRow, FactorSetRow, ReconciliationRow, SegmentFactorRow


class FactorSetRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, candidate: FactorSet) -> FactorSet:
        """Store a new set under the next version number (the given version is ignored)."""
        version = (self._session.scalar(select(func.max(FactorSetRow.version))) or 0) + 1
        row = FactorSetRow(
            version=version,
            created_at=candidate.created_at,
            activated_at=candidate.activated_at,
            method=candidate.method,
            parameters=json.dumps(dict(candidate.parameters), sort_keys=True),
            provenance=json.dumps(dict(candidate.provenance), sort_keys=True, default=str),
            reconciliation_count=candidate.reconciliation_count,
            backtest_score=candidate.backtest_score,
            baseline_score=candidate.baseline_score,
            forced=candidate.forced,
        )
        self._session.add(row)
        self._session.flush()
        self._session.add_all(
            SegmentFactorRow(factor_set_id=row.id, **_segment_values(factors))
            for factors in candidate.segments.values()
        )
        self._session.flush()
        return FactorSet(**{**candidate.__dict__, "version": version})

    def activate(self, version: int, at: datetime) -> None:
        self._session.execute(
            update(FactorSetRow).where(FactorSetRow.version == version).values(activated_at=at)
        )

    def get(self, version: int) -> FactorSet | None:
        row = self._session.scalar(select(FactorSetRow).where(FactorSetRow.version == version))
        return None if row is None else self._load(row)

    def active(self) -> FactorSet | None:
        """The most recently activated set."""
        row = self._session.scalar(
            select(FactorSetRow)
            .where(FactorSetRow.activated_at.is_not(None))
            .order_by(FactorSetRow.activated_at.desc(), FactorSetRow.version.desc())
            .limit(1)
        )
        return None if row is None else self._load(row)

    def newest(self) -> FactorSet | None:
        row = self._session.scalar(
            select(FactorSetRow).order_by(FactorSetRow.version.desc()).limit(1)
        )
        return None if row is None else self._load(row)

    def all(self, limit: int = 100) -> list[FactorSet]:
        """The newest `limit` sets, oldest first."""
        rows = list(
            self._session.scalars(
                select(FactorSetRow).order_by(FactorSetRow.version.desc()).limit(limit)
            )
        )
        return [self._load(row) for row in reversed(rows)]

    def _load(self, row: FactorSetRow) -> FactorSet:
        segments = self._session.scalars(
            select(SegmentFactorRow)
            .where(SegmentFactorRow.factor_set_id == row.id)
            .order_by(SegmentFactorRow.id)
        )
        return FactorSet(
            version=row.version,
            created_at=row.created_at,
            activated_at=row.activated_at,
            segments={item.segment: _segment(item) for item in segments},
            method=row.method,
            parameters=json.loads(row.parameters),
            provenance=json.loads(row.provenance),
            reconciliation_count=row.reconciliation_count,
            backtest_score=row.backtest_score,
            baseline_score=row.baseline_score,
            forced=row.forced,
        )

    def observations(self) -> tuple[ObservationArrays, list[str]]:
        """Every reconciled computed estimate as refit columns, with the estimate ids in
        the same order."""
        recon, estimate = ReconciliationRow.__table__, EstimateRow.__table__
        query = (
            select(
                recon.c.estimate_id,
                recon.c.gpu,
                recon.c.precision,
                recon.c.recompute,
                recon.c.started_at,
                recon.c.ended_at,
                recon.c.implied_effective_utilization,
                recon.c.implied_utilization,
                recon.c.implied_overhead,
            )
            .join(estimate, estimate.c.id == recon.c.estimate_id)
            .where(
                estimate.c.kind == "computed",
                recon.c.implied_effective_utilization > 0,
                recon.c.ended_at > recon.c.started_at,
            )
            .order_by(recon.c.ended_at, recon.c.estimate_id)
        )
        rows = self._session.execute(query).all()
        return _arrays(rows), [row.estimate_id for row in rows]

    def last_reconciliation_change(self) -> datetime | None:
        return self._session.scalar(select(func.max(ReconciliationRow.updated_at)))


def _arrays(rows: Sequence[object]) -> ObservationArrays:
    gpus: dict[str, int] = {}
    precisions: dict[str, int] = {}
    recomputes: dict[str | None, int] = {}
    n = len(rows)
    gpu = np.empty(n, np.intp)
    precision = np.empty(n, np.intp)
    recompute = np.empty(n, np.intp)
    started = np.empty(n)
    ended = np.empty(n)
    effective = np.empty(n)
    utilization = np.full(n, np.nan)
    overhead = np.full(n, np.nan)
    for i, row in enumerate(rows):
        r = cast(_Row, row)
        gpu[i] = gpus.setdefault(r.gpu, len(gpus))
        precision[i] = precisions.setdefault(r.precision, len(precisions))
        recompute[i] = recomputes.setdefault(r.recompute, len(recomputes))
        started[i] = _utc(r.started_at).timestamp()
        ended[i] = _utc(r.ended_at).timestamp()
        effective[i] = r.implied_effective_utilization
        u, f = r.implied_utilization, r.implied_overhead
        if u is not None and f is not None and u > 0 and f < 1:
            utilization[i], overhead[i] = u, f
    return ObservationArrays(
        gpu_names=tuple(gpus),
        precision_names=tuple(precisions),
        recompute_names=tuple(recomputes),
        gpu=gpu,
        precision=precision,
        recompute=recompute,
        started_at=started,
        ended_at=ended,
        effective_utilization=effective,
        utilization=utilization,
        overhead=overhead,
    )


class _Row:
    gpu: str
    precision: str
    recompute: str | None
    started_at: datetime
    ended_at: datetime
    implied_effective_utilization: float
    implied_utilization: float | None
    implied_overhead: float | None


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _segment_values(factors: SegmentFactors) -> dict[str, object]:
    return dataclasses.asdict(factors)  # the row's columns are the domain fields


def _segment(row: SegmentFactorRow) -> SegmentFactors:
    return SegmentFactors(
        segment=row.segment,
        level=cast(Level, row.level),
        utilization=row.utilization,
        utilization_p10=row.utilization_p10,
        utilization_p90=row.utilization_p90,
        overhead=row.overhead,
        overhead_p10=row.overhead_p10,
        overhead_p90=row.overhead_p90,
        log_sigma=row.log_sigma,
        n=row.n,
        n_throughput=row.n_throughput,
        combined_only=row.combined_only,
    )
