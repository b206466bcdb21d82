"""The typed results of the application object's use cases (frozen dataclasses). The
presenters turn them into text, JSON, the report and metrics; nothing here does I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from service.domain.records import (
    FactorSource,
    PassRecord,
    Reconciliation,
    RunningProjection,
    SavedEstimate,
)
from service.domain.values import Estimate, Plan, SensitivityRow

if TYPE_CHECKING:
    from service.calibration.calibrated import Calibrated
    from service.calibration.calibrated_plans import CalibratedPlan, CalibratedSensitivityRow
    from service.calibration.model import FactorSet, SegmentFactors


@dataclass(frozen=True)
class Answer:
    """An estimate and where its factors came from; `calibrated` is set when fitted factors
    (and so a P10/P50/P90) were asked for."""

    estimate: Estimate
    factor_source: FactorSource
    calibrated: Calibrated | None = None


@dataclass(frozen=True)
class SavedAnswer:
    answer: Answer
    saved: SavedEstimate


@dataclass(frozen=True)
class Sensitivity:
    """The table; `calibrated` rows (with P10/P90) when fitted factors were asked for."""

    base: Estimate
    rows: list[SensitivityRow]
    calibrated: list[CalibratedSensitivityRow] | None = None
    factor_set: int | None = None


@dataclass(frozen=True)
class PlanAnswer:
    """The plan; `calibrated` holds the quantile it was made at and its P10/P90 when fitted
    factors were asked for (then `plan.estimate` is the P50 at the chosen count)."""

    plan: Plan
    calibrated: CalibratedPlan | None = None
    factor_set: int | None = None


@dataclass(frozen=True)
class Unlinked:
    """What `unlink` did: the MLflow tag removed or not, and the estimate's reconciliation
    recomputed from its remaining runs (None: none of them has finished)."""

    estimate_id: str
    run_id: str
    tag_removed: bool
    reconciliation: Reconciliation | None


@dataclass(frozen=True)
class EstimateDetail:
    saved: SavedEstimate
    run_ids: list[str]


@dataclass(frozen=True)
class FactorsAnswer:
    """The chosen factor set (None: none yet, the published prior is in use)."""

    factor_set: FactorSet | None
    active_version: int | None
    prior_segments: list[SegmentFactors]
    prior_sources: list[str]

    @property
    def active(self) -> bool:
        return self.factor_set is not None and self.factor_set.version == self.active_version


@dataclass(frozen=True)
class FactorHistory:
    sets: list[FactorSet]
    active_version: int | None


@dataclass(frozen=True)
class Jobs:
    schedule: str
    timezone: str
    passes: list[PassRecord]


@dataclass(frozen=True)
class Health:
    """'ok' or the one-line reason, for each dependency."""

    database: str
    mlflow: str

    @property
    def ready(self) -> bool:
        return self.database == "ok"


@dataclass(frozen=True)
class ReportData:
    history: list[Reconciliation]
    accuracy: dict[str, object]
    factor_history: FactorHistory
    running: list[RunningProjection]
    running_error: str | None
    generated_at: datetime
