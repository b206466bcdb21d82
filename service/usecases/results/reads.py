"""What the read-side use cases answer: a factor set with the prior beside it, every set,
accuracy (raw and calibrated scores per group, and why a worse segment did not fall back),
health and the report's data. No numpy at run time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from service.domain.money import CostTotal
from service.domain.records import (
    Reconciliation,
    RunningProjection,
)
from service.domain.spending import SpendRow

if TYPE_CHECKING:
    from service.calibration.model import FactorSet, SegmentFactors


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

    @property
    def active(self) -> FactorSet | None:
        return next((s for s in self.sets if s.version == self.active_version), None)


@dataclass(frozen=True)
class Health:
    """'ok' or the one-line reason, for each dependency."""

    database: str
    mlflow: str
    mlflow_age_seconds: float | None = None  # how old the MLflow state is (a cached probe)

    @property
    def ready(self) -> bool:
        return self.database == "ok"


@dataclass(frozen=True)
class ReportScope:
    """`reckon report --gpu --since`, read: the catalog's name of the GPU (an alias such as
    h100 resolved) and an aware UTC time; None is no filter."""

    gpu: str | None = None
    since: datetime | None = None


@dataclass(frozen=True)
class ReportData:
    """What `reckon report` draws, already filtered to its scope: the history, accuracy by
    segment (overall = the scope's: the GPU's with --gpu), the same per segment and
    `period` (the error chart's bias lines), the factor sets made since --since and the
    active one (what is served now, whenever it was made), and the running runs."""

    history: list[Reconciliation]
    accuracy: Accuracy | None  # None: nothing to score (the report says so)
    factor_history: FactorHistory
    running: list[RunningProjection]
    running_error: str | None
    generated_at: datetime
    scope: ReportScope = ReportScope()
    series: Accuracy | None = None  # by "<segment> <period>"
    period: str = "week"  # "week" or "month"
    active: FactorSet | None = None


@dataclass(frozen=True)
class Scores:
    """n; median and mean absolute % error; bias = exp(mean log(predicted/observed)) − 1 in
    % (> 0: predictions too long) and the mean log ratio itself; coverage = share of
    observations inside P10–P90 (None when no prediction had a range)."""

    n: int
    median_ape: float | None
    mape: float | None
    bias: float | None
    bias_log: float | None
    coverage: float | None


@dataclass(frozen=True)
class ScorePair:
    """Raw and calibrated scores of the same predictions; `calibrated_worse`: calibrated's
    median absolute error is the higher one."""

    raw: Scores
    calibrated: Scores
    calibrated_worse: bool
    # The hand baseline on the same targets as calibrated (the median observed factor of the
    # run's gpu/precision over the runs ended before it; service.calibration.by_hand).
    by_hand: Scores | None = None


@dataclass(frozen=True)
class NotFallenBack:
    """Why a segment whose calibrated predictions look worse has not fallen back: the gate's
    evidence on it (basis "own" or "all" targets, how many, the median absolute errors as
    fractions, the share of resamples in which calibrated is worse, whether that is beyond
    noise: None when too few to judge) and the gate's thresholds."""

    basis: str
    n: int
    calibrated: float | None
    raw: float | None
    worse: bool | None
    worse_share: float | None
    looks_worse: bool
    min_targets: int
    confidence: float


@dataclass(frozen=True)
class AccuracyGroup:
    group: str
    scores: ScorePair
    fallback: bool | None  # None: the grouping is not by GPU or segment
    not_fallen_back: NotFallenBack | None = None
    fallback_to: str | None = None  # "raw" or "by_hand" where it fell back
    # Planned against observed cost of the group's runs, per currency (service.domain.money).
    cost: tuple[CostTotal, ...] = ()


@dataclass(frozen=True)
class Accuracy:
    """`reckon accuracy`: forecasts overall and per group; imported (retrospective) runs
    scored apart."""

    by: str | None
    since: datetime | None
    overall: ScorePair
    groups: tuple[AccuracyGroup, ...]
    retrospective: ScorePair
    # Forecasts whose runs trained another configuration than planned, and those whose runs
    # logged none (service.domain.configuration): their error is against the plan either way.
    config_differs: int = 0
    config_from_plan: int = 0
    # The active factor set and how many runs its fit read (`reckon factors` shows that n):
    # fewer than scored here when recorded predictions or runs older than its window exist.
    factor_set: int | None = None
    fitted_on: int | None = None
    cost: tuple[CostTotal, ...] = ()  # of every forecast scored, per currency


@dataclass(frozen=True)
class Spend:
    """`reckon spend`: planned against observed cost per group and currency, the totals per
    currency over every group, and what was not compared: the GPUs the prices file lacks,
    runs priced in two currencies, and imported runs (left out: never a budget)."""

    by: str | None
    since: datetime | None
    gpu: str | None
    rows: tuple[SpendRow, ...]
    totals: tuple[CostTotal, ...]
    unpriced_gpus: tuple[str, ...]
    in_two_currencies: int
    imported_left_out: int
    prices_file: bool  # RECKON_PRICES_FILE is set (else only estimates' own prices count)
