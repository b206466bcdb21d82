"""What the planning and registry use cases answer: estimates (calibrated or not), saved
answers, plans, sensitivity tables, unlinks, a stored estimate with its runs. Imported by
the planning commands, so it holds nothing more."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from service.domain.memory_plans import Bound, MemoryCheck
from service.domain.records import (
    FactorSource,
    Reconciliation,
    SavedEstimate,
)
from service.domain.values import Estimate, Plan, SensitivityRow

if TYPE_CHECKING:
    from service.calibration.calibrated import Calibrated
    from service.calibration.calibrated_plans import CalibratedPlan, CalibratedSensitivityRow


@dataclass(frozen=True)
class Answer:
    """An estimate and where its factors came from; `calibrated` is set when fitted factors
    (and so a P10/P50/P90) were asked for; `memory`: its training memory per GPU."""

    estimate: Estimate
    factor_source: FactorSource
    calibrated: Calibrated | None = None
    memory: MemoryCheck = field(kw_only=True)


@dataclass(frozen=True)
class SavedAnswer:
    answer: Answer
    saved: SavedEstimate


@dataclass(frozen=True)
class Sensitivity:
    """The table; `calibrated` rows (with P10/P90) when fitted factors were asked for;
    `fits`: whether each row fits in memory (None: its chip's memory is unknown)."""

    base: Estimate
    rows: list[SensitivityRow]
    calibrated: list[CalibratedSensitivityRow] | None = None
    factor_set: int | None = None
    fits: list[bool | None] = field(kw_only=True)


@dataclass(frozen=True)
class PlanAnswer:
    """The plan; `calibrated` holds the quantile it was made at and its P10/P90 when fitted
    factors were asked for (then `plan.estimate` is the P50 at the chosen count). `bound`:
    what decided the count, the deadline ("time", needing `time_gpus`) or the memory per GPU
    (`memory`, checked at the answered count)."""

    plan: Plan
    calibrated: CalibratedPlan | None = None
    factor_set: int | None = None
    bound: Bound = "time"
    time_gpus: int | None = None
    memory: MemoryCheck = field(kw_only=True)


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
